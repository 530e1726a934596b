"""The planted-judge self-test's tables as Markdown, from `analysis.selftest.run_selftest`.

Coverage is shown as a grid (a row per group size, judge and figure; a column per number of
mixed tasks per audit) for the interval in use, and as min-max summaries for the alternatives;
the paired differences as the same grid per pair. Reads the result dict; computes nothing
but minima, maxima and the mark under which a cell is listed."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from judgelab.analysis.selftest import INTERVALS


def low_mark(audits: int) -> float:
    """Two Monte Carlo SEs below 95 % at `audits` audits per cell: a cell under it is listed
    (a cell at 95 % falls there by chance about once in 40)."""
    return 0.95 - 2 * math.sqrt(0.95 * 0.05 / audits)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def _span(values: list[float]) -> str:
    return f"{100 * min(values):.1f}–{100 * max(values):.1f} %" if values else "n/a"


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _head(columns: list[str]) -> list[str]:
    return [_row(columns), _row(["---"] * len(columns))]


def _grid(rows: list[dict[str, Any]], label: str, value: str) -> list[str]:
    """A row per (k, `label`, figure), a column per number of clusters: `value` of each."""
    clusters = sorted({r["clusters"] for r in rows})
    cells: dict[tuple, dict[int, float]] = defaultdict(dict)
    truth: dict[tuple, float] = {}
    for r in rows:
        key = (r["k"], r[label], r["figure"])
        cells[key][r["clusters"]] = r[value]
        truth[key] = r["true"]
    out = _head(["k", label, "figure", "true value", *[f"{n} tasks" for n in clusters]])
    for key, by_n in cells.items():
        out.append(_row([*key, f"{truth[key]:.3f}", *[_pct(by_n.get(n)) for n in clusters]]))
    return out


def _summary(rows: list[dict[str, Any]]) -> list[str]:
    """Per group size and number of clusters: min-max over every judge x figure cell, for
    each interval measured."""
    groups: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["k"], r["clusters"])].append(r)
    out = _head(["k", "mixed tasks", "cells", "used", "percentile", "BCa", "jackknife t"])
    for (k, n), group in sorted(groups.items()):
        spans = [_span([r[f"coverage_{m}"] for r in group]) for m in INTERVALS]
        out.append(_row([k, n, len(group), *spans]))
    return out


def _by_figure(rows: list[dict[str, Any]], value: str) -> list[str]:
    """Per group size and figure: min-max of `value` over judges (or pairs), by clusters."""
    clusters = sorted({r["clusters"] for r in rows})
    spans: dict[tuple[int, str], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        spans[(r["k"], r["figure"])][r["clusters"]].append(r[value])
    out = _head(["k", "figure", *[f"{n} tasks" for n in clusters]])
    for (k, figure), by_n in spans.items():
        out.append(_row([k, figure, *[_span(by_n[n]) for n in clusters]]))
    return out


def _low_cells(rows: list[dict[str, Any]], label: str, value: str, from_n: int) -> list[str]:
    """The cells from `from_n` clusters up more than two Monte Carlo SEs below 95 %."""
    mark = low_mark(rows[0]["audits"]) if rows else 0.0
    low = [r for r in rows if r["clusters"] >= from_n and r[value] < mark]
    if not low:
        return [f"No cell from {from_n} mixed tasks up is below {_pct(mark)}."]
    cells = ", ".join(f"k = {r['k']} {r[label]} {r['figure']} at {r['clusters']} "
                      f"({_pct(r[value])})" for r in low)  # fmt: skip
    return [
        f"Cells from {from_n} mixed tasks up below {_pct(mark)} (two Monte Carlo SEs under "
        f"95 %): {cells}."
    ]


def selftest_markdown(result: dict[str, Any], cells: bool = True) -> str:
    """The self-test's tables (coverage, paired differences, family-wise error, order, power)
    as markdown; `cells`: with the per-cell grids of the interval in use."""
    cfg = result["settings"]
    sizes = ", ".join(str(k) for k in cfg["group_sizes"])
    min_n = cfg["min_ci_groups"]
    lines = [
        f"Planted-judge self-test: {cfg['audits']} simulated audits per cell, k = {sizes} "
        f"candidates per task, {cfg['bootstrap']} bootstrap resamples, truth from "
        f"{cfg['truth_tasks']} tasks, seed {cfg['seed']}.",
        "",
        "Coverage of the 95 % CIs (share of audits whose CI holds the true value), by mixed "
        "tasks per audit (the clusters behind each figure), min–max over every judge × figure "
        "cell. used: what metrics.json carries (Wilson at the effective size for shares, the "
        "studentized bootstrap for ratios); the others are the alternatives measured:",
        "",
        *_summary(result["coverage"]),
        "",
        "Coverage of the interval in use, by figure (min–max over the judges):",
        "",
        *_by_figure(result["coverage"], "coverage_used"),
        "",
        *_low_cells(result["coverage"], "judge", "coverage_used", min_n),
        "",
        "Coverage of the paired-difference interval (power.compare's difference_ci_low/high: "
        "D ± t SE over the shared tasks; signal fidelity on the tasks either judge has a "
        "weight in), by figure, min–max over every pair of judges:",
        "",
        *_by_figure(result["differences"], "coverage"),
        "",
        *_low_cells(result["differences"], "pair", "coverage", min_n),
    ]
    if cells:
        lines += ["", "Every cell, the interval in use:", "",
                  *_grid(result["coverage"], "judge", "coverage_used"),
                  "", "Every pair, the paired-difference interval:", "",
                  *_grid(result["differences"], "pair", "coverage")]  # fmt: skip
    return "\n".join(lines + _tests(result)) + "\n"


def _tests(result: dict[str, Any]) -> list[str]:
    """The family-wise error, order and power lines of `selftest_markdown`."""
    cfg = result["settings"]
    lines = [
        "",
        f"Family-wise error (judges planted alike as `{cfg['alike']}`, every pair compared, "
        "Holm); audits tested: those with a p-value for some pair (from "
        f"{cfg['min_ci_groups']} shared tasks):",
        "",
        *_head(["k", "figure", "clusters", "judges", "audits tested",
                "any pair declared different"]),
    ]  # fmt: skip
    for r in result["family_wise"]:
        lines.append(_row([r["k"], r["figure"], r["clusters"], r["judges"], r["audits_tested"],
                           _pct(r["family_wise_error"])]))  # fmt: skip
    lines += ["", "Order: judges alike but for their signal (planted best first), one audit, "
              "ranked on signal fidelity; separated: Holm-adjusted p < 0.05 against the next:",
              "", *_head(["k", "mixed tasks", "planted", "ranked", "signal fidelity",
                          "separated from next"])]  # fmt: skip
    for r in result["order"]:
        values = ", ".join(f"{r['signal_fidelity'][n]:.3f}" for n in r["ranked"])
        separated = ", ".join("yes" if s else "no" for s in r["separated_from_next"])
        lines.append(_row([r["k"], r["clusters"], ", ".join(r["planted"]),
                           ", ".join(r["ranked"]), values, separated]))  # fmt: skip
    p = result["power"]
    lines += ["", f"Power (k = {p['k']}): sharp vs coarse, true gap in strict pairwise "
              f"accuracy {p['true_gap']:.3f}; the power analysis asks for {p['tasks_needed']} "
              f"mixed tasks; audits of that size separate them in {_pct(p['power'])} "
              "(target 80 %)."]  # fmt: skip
    return lines


DECISION_COLUMNS = {
    "blind_passes_rule_1": "blind judge shown above chance (rule 1; ≤ 2.5 %)",
    "blind_named": "blind judge named (the judge or a contender)",
    "twins_called_different": "equal judges called different (≤ 5 %)",
    "twins_equivalent": "equal judges shown equivalent (power)",
    "gap_found": "gap of the margin found (power)",
    "gap_called_equivalent": "gap of the margin called equivalent (≤ 5 %)",
}


def decision_markdown(result: dict[str, Any]) -> str:
    """The decision's self-test (`analysis.decision_selftest`) as a table, a row per number of
    tasks, with the planted values above it."""
    planted, s = result["planted"], result["settings"]
    lines = [
        f"Planted: a and its twin {planted['a']:.3f}, b {planted['b']:.3f} (gap "
        f"{planted['gap']:.3f}, margin {s['margin']:g}), blind 0; k = {s['k']}, "
        f"{s['audits']} audits per row, seed {s['seed']}, true values over "
        f"{s['truth_tasks']} tasks.",
        "",
        *_head(["tasks", *DECISION_COLUMNS.values()]),
    ]
    lines += [_row([r["tasks"], *(_pct(r[key]) for key in DECISION_COLUMNS)])
              for r in result["rows"]]  # fmt: skip
    return "\n".join(lines) + "\n"
