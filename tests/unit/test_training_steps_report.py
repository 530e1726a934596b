"""The report's training section says which GRPO steps each judge took, why a trained epoch
took none, and what the section is at its size (a demonstration below the stated effect's
MDE, not evidence): sentences generated from the figures, checked against counts by hand."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from judgelab.analysis import training
from judgelab.config import AnalysisSettings
from judgelab.report import training as training_report
from judgelab.report.as_html import html_lines
from judgelab.report.as_markdown import lines as md_lines
from tests.support.report_inputs import write_training_histories


def _md(metrics: dict) -> list[str]:
    """The training section's Markdown lines."""
    return md_lines(training_report.section_blocks(metrics))


def _html(metrics: dict) -> list[str]:
    """The training section's HTML lines."""
    return html_lines(training_report.section_blocks(metrics))


def history(losses: list[float | None], skipped: list[int], unscored: list[float]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "epoch": list(range(len(losses))),
            "groups": [2] * len(losses),
            "groups_skipped": skipped,
            "unscored_rate": unscored,
            "loss": losses,
        },
        schema_overrides={"loss": pl.Float64},
    )


def test_step_counts_and_why_no_step_by_hand() -> None:
    """Epochs 0-2 are trained (3 is the final policy, scored only): epoch 0 stepped on 1 of
    its 2 groups; epoch 1's groups were all flat; epoch 2's judge scored nothing (its groups
    count as skipped too, so the flat rule names it first) and epoch 3 is never counted."""
    h = history([0.5, None, None, None], [1, 2, 2, 2], [0.0, 0.0, 1.0, 0.0])
    counts = training.step_counts(h)
    assert counts["trained_epochs"] == 3 and counts["trained_groups"] == 6
    assert counts["stepped_groups"] == 1
    assert [n["epoch"] for n in counts["no_step"]] == [1, 2]
    assert "no sample had an advantage" in counts["no_step"][0]["why"]
    judged_nothing = {"groups": 2, "groups_skipped": 0, "unscored_rate": 1.0}
    assert training.no_step_reason(judged_nothing) == "the judge scored none of its samples"


def test_a_judge_without_a_step_is_said_plainly() -> None:
    m = {"steps": 0, "trained_epochs": 1, "trained_groups": 1, "stepped_groups": 0,
         "no_step": [{"epoch": 0, "why": "every trained group's rewards were equal"}]}  # fmt: skip
    assert training_report.steps_sentence("execution", m) == (
        "**execution** took no GRPO step in 1 trained epoch (epoch 0: no step, every trained "
        "group's rewards were equal)."
    )
    m = {"steps": 2, "trained_epochs": 2, "trained_groups": 4, "stepped_groups": 3,
         "no_step": []}  # fmt: skip
    assert training_report.steps_sentence("ruler", m) == (
        "**ruler** took 2 GRPO steps in 2 trained epochs, on 3 of 4 groups with reward spread."
    )


def test_the_section_says_it_is_a_demonstration_below_the_effects_mde(tmp_path: Path) -> None:
    """write_training_histories: 2 held-out tasks, 1 draw each at base and final, 4 trained
    epochs of 1 group each, every one stepped. Its MDE is far above the stated effect, so
    the section calls itself a demonstration, naming the smallest MDE; a design that can
    detect the effect drops the label."""
    write_training_histories(tmp_path, ("execution",))
    metrics = training.training_metrics(tmp_path, AnalysisSettings(bootstrap=0, min_ci_groups=2))
    m = metrics["execution"]
    assert (m["steps"], m["trained_epochs"], m["stepped_groups"], m["no_step"]) == (4, 4, 4, [])
    md = "\n".join(_md({"training": metrics}))
    assert "**execution** took 4 GRPO steps in 4 trained epochs, on 4 of 4 groups" in md
    mde = m["mde"]["mde"]
    assert not m["mde"]["decidable"]
    assert f"its smallest detectable held-out change is {mde:.2f}, above the stated" in md
    assert "A demonstration at this size, not evidence" in md
    html = "\n".join(_html({"training": metrics}))
    assert "A demonstration at this size, not evidence" in html
    decided = {"execution": {**m, "mde": {**m["mde"], "decidable": True}}}
    assert training_report.scale_line(decided) is None
