"""The report's paired-comparison section: a summary generated from the power figures
(`analysis.power.power_analysis`) and one table row per pair of judges."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from judgelab.analysis.power import LABELS, sorted_pairs, units
from judgelab.report.model import Block, Heading, Paragraph, table


def label(power: dict[str, Any]) -> str:
    return LABELS.get(power.get("endpoint") or "", str(power.get("endpoint")))


def summary(power: dict[str, Any]) -> str:
    """Plain sentences: how many pairs the audit separates, or why it cannot estimate yet."""
    pairs = [p for _, _, p in sorted_pairs(power.get("pairs") or {})]
    if not pairs:
        return "Fewer than two judges: there is nothing to rank."
    n_max = max(p["n_groups"] for p in pairs)
    min_ci_groups = power["min_ci_groups"]
    compared = power.get("units") or units(power.get("endpoint") or "")
    if not power.get("n_comparisons"):
        return (
            f"The power analysis cannot estimate yet: the judges share at most {n_max} "
            f"{'task' if n_max == 1 else 'tasks'} to compare ({compared}); it needs at least "
            f"{min_ci_groups} for a pair before it can say how many tasks would separate them. "
            f"Try an audit with {min_ci_groups} or more such tasks."
        )
    n_sep = sum(1 for p in pairs if p["separated"])
    head = (
        f"{n_sep} of {len(pairs)} pairs of judges differ in {label(power)} after Holm's "
        f"correction over {power['n_comparisons']} comparisons (adjusted p < "
        f"{power['alpha']:g})."
    )
    if power.get("can_rank"):
        return head + " Every pair is separated, on enough tasks for the margin."
    n_eq = sum(1 for p in pairs if p.get("equivalent"))
    return head + (
        f" {n_eq} {'pair is' if n_eq == 1 else 'pairs are'} shown equivalent within the margin "
        f"{power['margin']:g} (`analysis.margin`; TOST, Holm over the same comparisons). Tasks "
        "to decide: per undecided pair, from its own spread between tasks, the shared tasks "
        f"that find a gap of the margin or show equivalence within it (power {power['power']:g})."
    )


Formatter = Callable[[dict[str, Any], str], str]  # report.fmt_ci


def _cell(x: Any) -> str:
    return "n/a" if x is None else str(x)


HEADER = ("judges", "difference [95 % CI]", "tasks compared", "p (Holm)",
          "equivalence p (TOST, Holm)", "tasks to decide at the margin", "verdict")  # fmt: skip


def verdict(a: str, b: str, p: dict[str, Any]) -> str:
    if p["separated"]:
        better = a if p["difference"] > 0 else b
        return f"{better} higher (Holm-adjusted p < alpha)"
    if p.get("p_value") is None:
        return "not tested: " + (p.get("power_reason") or p.get("reason") or "no CI")
    if p.get("equivalent"):
        return "equivalent within the margin"
    return "undecided"


def rows(power: dict[str, Any], fmt: Formatter) -> list[list[str]]:
    out = []
    for a, b, p in sorted_pairs(power.get("pairs") or {}):
        holm_p = "n/a" if p.get("p_holm") is None else f"{p['p_holm']:.3f}"
        eq = p.get("p_equivalence_holm")
        out.append(
            [f"{a} − {b}", fmt(p, "difference"), str(p["n_groups"]), holm_p,
             "n/a" if eq is None else f"{eq:.3f}", _cell(p.get("tasks_to_decide")),
             verdict(a, b, p)]
        )  # fmt: skip
    return out


def power_blocks(power: dict[str, Any], fmt: Formatter) -> list[Block]:
    """The section: its summary and, where there are pairs, one row per pair."""
    if not power:
        return []
    out: list[Block] = [
        Heading(f"Paired comparisons and power ({label(power)})"),
        Paragraph.of(summary(power)),
    ]
    if power.get("pairs"):
        out.append(table(HEADER, rows(power, fmt), "power"))
    return out
