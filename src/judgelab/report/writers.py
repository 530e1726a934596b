"""Report section for metrics.json's ``writers`` block (`judgelab.analysis.writers`): the truth
figures by origin and by writer, one row per (origin or writer, evaluator). No section when
the block is absent (one writer, one origin). Descriptive only: the section states no
comparison; each cell carries its CI or its n (`report.format.fmt_cell`)."""

from __future__ import annotations

from typing import Any

from judgelab.report.format import fmt_cell
from judgelab.report.model import Paragraph, Section, ci_table
from judgelab.report.sections import section

TITLE = "By writer: natural rollouts and contrast groups"
COLUMNS = (
    "candidates of",
    "evaluator",
    "candidates (pass / fail)",
    "signal fidelity",
    "strict pairwise acc. (ties wrong)",
    "top-1 acc. − chance",
    "advantage fidelity",
    "false praise within group",
    "false praise (score ≥ threshold, absolute scale)",
)
INTRO = (
    "Each row is an evaluator's truth figures on one subset of the candidates, computed as "
    "the tables above compute them on the headline's. "
    "Within-group figures compare the subset's candidates of a task with one another, so a "
    "writer whose candidates all fail (a mutant kind) has none. Contrast groups are a task's "
    "reference solution and mutants its tests reject (`judgelab.rollouts.contrast`); natural "
    "candidates are everything else."
)


def _rows(blocks: dict[str, Any], label: str) -> list[list[str]]:
    rows = []
    for name, block in blocks.items():
        for evaluator, t in sorted(block["evaluators"].items()):
            rows.append(
                [
                    f"{label} {name}",
                    evaluator,
                    f"{t.get('n_passing', 0)} / {t.get('n_failing', 0)}",
                    fmt_cell(t, "signal_fidelity"),
                    fmt_cell(t, "pairwise_accuracy_strict"),
                    fmt_cell(t, "top1_over_chance"),
                    fmt_cell(t, "advantage_fidelity"),
                    fmt_cell(t, "false_praise_within_group", pct=True),
                    fmt_cell(t, "false_praise_absolute", pct=True),
                ]
            )
    return rows


def writers_section(metrics: dict[str, Any]) -> list[Section]:
    """The section, or none when metrics.json has no ``writers`` block."""
    block = metrics.get("writers")
    if not block:
        return []
    rows = _rows(block.get("by_origin", {}), "origin") + _rows(block.get("by_writer", {}), "writer")
    min_ci_groups = (metrics.get("settings") or {}).get("min_ci_groups")
    lost = block.get("n_candidates_no_writer", 0)
    note = f" {lost} scored candidates are not in the rollouts table (no writer)." if lost else ""
    body = [Paragraph.of(INTRO + note), ci_table(COLUMNS, rows, "writers", min_ci_groups)]
    return [section(TITLE, body)]


KNOWN_TRUTH = "Known-truth groups"
KNOWN_INTRO = (
    "A secondary population: each task's known-truth contrast group (its reference solution "
    "and mutants its tests reject, `judgelab.rollouts.contrast`), on which every truth figure "
    "is computed as on the headline's natural candidates, with its own bootstrap and n. "
    "Known-truth groups tell how a judge ranks code of known quality; GRPO never sees them, "
    "so they never enter the ranking or the decision."
)


def known_truth_section(metrics: dict[str, Any]) -> list[Section]:
    """The known-truth groups' section, or none when metrics.json has no ``known_truth``."""
    block = metrics.get("known_truth")
    if not block:
        return []
    rows = _rows({"contrast": block}, "known-truth")
    min_ci_groups = (metrics.get("settings") or {}).get("min_ci_groups")
    counts = f" {block.get('n_candidates')} candidates of {block.get('n_tasks')} tasks."
    body = [Paragraph.of(KNOWN_INTRO + counts),
            ci_table(COLUMNS, rows, "known-truth", min_ci_groups)]  # fmt: skip
    return [section(KNOWN_TRUTH, body)]
