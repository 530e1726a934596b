"""README's findings table: one row per judge of a finished audit, every figure with its CI or
its n, read from the metrics files the stages wrote (nothing recomputed here).

`findings_table(data_dir)` takes a project's `data/` folder: `analysis/metrics.json` (the
audit: agreement with execution truth, score distribution), and, where those parts have run,
`probes/metrics.json` (position, self-preference, perturbation) and the training figures the
analysis folded in. A part that has not run says so in its cells; nothing is left blank.
`python -m judgelab.analysis.headline reference/data` prints it; tests/unit/
test_reference_results.py holds README's copy to the committed reference audit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from judgelab.analysis.ranking import rank_judges
from judgelab.analysis.report import NA, fmt_ci, fmt_num, fmt_pct, interval, zero_advantage_cell

NOT_RUN = "not run yet"
COLUMNS = (
    "tier",
    "judge",
    "pairwise acc., mixed groups",
    "top-1 acc.",
    "false praise (≥ threshold)",
    "unscored",
    "out of range",
    "zero-advantage groups",
    "position consistency",
    "self-preference gap",
    "robust to comments / claims",
    "held-out pass rate after training (Δ)",
)


def with_n(t: dict[str, Any], key: str, pct: bool = False) -> str:
    """`0.720 [0.610, 0.830], n = 12` or `0.750 (n = 2, too few for a CI)`: the figure with
    the task groups behind it, and its CI only where it is valid."""
    if t.get(key) is None:
        return NA
    ci = interval(t, key)
    if ci.valid:
        return f"{fmt_ci(t, key, pct)}, n = {ci.n_groups}"
    value = fmt_pct(t[key]) if pct else fmt_num(t[key])
    return f"{value} (n = {ci.n_groups}, too few for a CI)" if ci.n_groups else value


def _rate(ev: dict[str, Any], key: str, count: str) -> str:
    rate = ev.get(key)
    return NA if rate is None else f"{fmt_pct(rate)} ({ev.get(count, 0)} of {ev['n_rows']})"


def _beside_floor(t: dict[str, Any], key: str, pct: bool = False) -> str:
    """`with_n`, then the figure's noise floor where the probes measured one: what a judge
    with no such bias but this judge's repeat noise shows (README, "Bias probes")."""
    cell = with_n(t, key, pct)
    floor = t.get(f"{key}_noise_floor")
    if floor is None or cell == NA:
        return cell
    return f"{cell}; noise floor {fmt_pct(floor) if pct else fmt_num(floor)}"


def _probe_cells(probe: dict[str, Any] | None) -> list[str]:
    if probe is None:
        return [NOT_RUN] * 3
    position = _beside_floor(probe.get("position", {}), "position_consistency")
    self_gap = with_n(probe.get("self_preference", {}), "self_gap")
    perturbation = probe.get("perturbation", {})
    robust = " / ".join(
        _beside_floor(perturbation[kind], "robustness_rate", pct=True)
        if kind in perturbation
        else NA
        for kind in ("comments", "claims")
    )
    return [position, self_gap, robust]


def _training_cell(trained: dict[str, Any] | None) -> str:
    if trained is None:
        return NOT_RUN
    heldout = trained.get("heldout", {})
    if heldout.get("final") is None:
        return NA
    delta, ci = heldout["delta"], heldout.get("delta_ci")
    spread = f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else f"({heldout.get('ci_reason')})"
    n = f"{heldout['n_tasks']} tasks"
    if "n_seeds" in heldout:  # trained over several seeds: the CI resamples tasks and seeds
        n += f" × {heldout['n_seeds']} seeds"
    mde = trained.get("mde") or {}
    if mde.get("mde") is not None and not mde["decidable"]:  # issue #28.8: say it cannot decide
        n += f"; unable to decide: MDE {mde['mde']:.2f} > {mde['effect']:.2f}"
    return f"{heldout['base']:.3f} → {heldout['final']:.3f} (Δ {delta:+.3f} {spread}, n = {n})"


def findings_rows(analysis: dict[str, Any], probes: dict[str, Any] | None) -> list[list[str]]:
    """One row per evaluator other than the truth, best tier first (`rank_judges`: pairwise
    accuracy on mixed groups; judges whose paired difference has no CI excluding 0 share a
    tier), unranked ones last; by name within a tier."""
    truth = analysis.get("execution_truth", {}).get("evaluator")
    training = analysis.get("training")
    trained_judges = set(analysis.get("train_judges", []))
    ranking = rank_judges(analysis)
    tier_of = {name: str(i + 1) for i, tier in enumerate(ranking["tiers"]) for name in tier}
    order = [*(n for tier in ranking["tiers"] for n in sorted(tier)), *sorted(ranking["unranked"])]
    rows = []
    for name in order:
        ev = analysis["evaluators"][name]
        if name == truth:
            continue
        t = ev.get("truth", {})
        probe = (probes or {}).get("judges", {}).get(name)
        probe_cells = _probe_cells(probe) if probes is not None else [NOT_RUN] * 3
        if probes is not None and probe is None:
            probe_cells = ["not probed"] * 3
        if name not in trained_judges:
            train_cell = "not trained"
        else:
            train_cell = _training_cell((training or {}).get(name))
        rows.append(
            [
                tier_of.get(name, "unranked"),
                name,
                with_n(t, "pairwise_accuracy"),
                with_n(t, "top1_accuracy"),
                with_n(t, "false_praise_rate", pct=True),
                _rate(ev, "unscored_rate", "n_unscored"),
                _rate(ev, "out_of_range_rate", "n_out_of_range"),
                zero_advantage_cell(ev),
                *probe_cells,
                train_cell,
            ]
        )
    return rows


def findings_table(data_dir: Path) -> str:
    """The markdown table for the audit under `data_dir` (a project's data/ folder)."""
    analysis = json.loads((data_dir / "analysis" / "metrics.json").read_text())
    probes_path = data_dir / "probes" / "metrics.json"
    probes = json.loads(probes_path.read_text()) if probes_path.exists() else None
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "| " + " | ".join("---" for _ in COLUMNS) + " |",
    ]
    for row in findings_rows(analysis, probes):
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(findings_table(Path(sys.argv[1] if len(sys.argv) > 1 else "data")))
