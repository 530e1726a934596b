"""The planted-judge self-test's tables as Markdown, from `analysis.selftest.run_selftest`."""

from __future__ import annotations

from typing import Any

from judgelab.analysis.selftest import INTERVALS


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def selftest_markdown(result: dict[str, Any]) -> str:
    """The self-test's tables (coverage by tasks, family-wise error, power) as markdown."""
    cfg = result["settings"]
    lines = [
        f"Planted-judge self-test: {cfg['audits']} simulated audits per cell, k = {cfg['k']} "
        f"candidates per task, {cfg['bootstrap']} bootstrap resamples, truth from "
        f"{cfg['truth_tasks']} tasks, seed {cfg['seed']}.",
        "",
        "Coverage of the 95 % CIs (share of audits whose CI holds the true value), by mixed "
        "tasks per audit (the clusters behind each figure). used: what metrics.json carries "
        "(Wilson at the effective size for shares, the studentized bootstrap for advantage "
        "fidelity and top-1 over chance); the others are the alternatives measured:",
        "",
        "| judge | figure | true value | clusters | used | percentile | BCa | jackknife t |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["coverage"]:
        cells = " | ".join(_pct(row[f"coverage_{m}"]) for m in INTERVALS)
        lines.append(f"| {row['judge']} | {row['figure']} | {row['true']:.3f} | "
                     f"{row['clusters']} | {cells} |")  # fmt: skip
    lines += ["", "Family-wise error (judges planted alike, every pair compared, Holm):", "",
              "| clusters | judges | audits tested | any pair declared different |",
              "|---|---|---|---|"]  # fmt: skip
    for row in result["family_wise"]:
        lines.append(f"| {row['clusters']} | {row['judges']} | {row['audits_tested']} | "
                     f"{_pct(row['family_wise_error'])} |")  # fmt: skip
    p = result["power"]
    gap = p["true_gap"]
    lines += ["", f"Power: sharp vs coarse, true gap in strict pairwise accuracy {gap:.3f}; "
              f"the power analysis asks for {p['tasks_needed']} mixed tasks; audits of that "
              f"size separate them in {_pct(p['power'])} (target 80 %)."]  # fmt: skip
    return "\n".join(lines) + "\n"
