"""Report section for metrics.json's ``truth_recheck`` block (`judgelab.analysis.recheck`): how
many of an earlier run's execution verdicts this run changed, and each change. No section
when the block is absent (`analysis.truth_baseline` unset). Every number in its sentence is a
field of the block (`sentence`)."""

from __future__ import annotations

from typing import Any

from judgelab.report.model import Block, Paragraph, Section, table
from judgelab.report.sections import section

TITLE = "Execution truth re-checked"
COLUMNS = ("candidate", "task", "was (score, outcome)", "now (score, outcome)")


def sentence(block: dict[str, Any]) -> str:
    """The section's claim, from the block's counts alone."""
    n, changed, absent = block["n_compared"], block["n_changed"], block["n_absent"]
    text = (
        f"This run's execution evaluator scored again {n} of the {block['n_baseline']} "
        f"candidates whose verdicts `{block['baseline']}` holds: {changed} of the {n} "
        f"verdicts changed (score or outcome)"
    )
    if absent:
        text += f"; {absent} of its candidates are not in this run, so were not re-checked"
    return text + "."


def _rows(block: dict[str, Any]) -> list[list[str]]:
    def verdict(v: dict[str, Any]) -> str:
        score = "no score" if v["score"] is None else f"{v['score']:g}"
        return f"{score}, {v['outcome']}"

    return [
        [c["candidate_id"], c.get("task_id") or "", verdict(c["was"]), verdict(c["now"])]
        for c in block["changed"]
    ]


def recheck_section(metrics: dict[str, Any]) -> list[Section]:
    """The section, or none when metrics.json has no ``truth_recheck`` block."""
    block = metrics.get("truth_recheck")
    if not block:
        return []
    claim = sentence(block)
    rows = _rows(block)
    body: list[Block] = [Paragraph.of(claim)]
    if rows:  # verdicts, not figures: no cell carries a CI, so no minimum applies
        body.append(table(COLUMNS, rows, "truth-recheck"))
    return [section(TITLE, body)]
