"""Training analysis: the per-judge table, held-out change with paired CIs, the alarm."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from judgelab.analysis import training
from judgelab.config import AnalysisSettings
from tests.support.report_inputs import write_training_histories

JUDGES = ("execution", "ruler-qwen-1.5b")


def test_training_metrics_table_and_alarm(tmp_path: Path) -> None:
    write_training_histories(tmp_path, JUDGES)
    metrics = training.training_metrics(tmp_path, AnalysisSettings(bootstrap=500, min_ci_groups=2))
    assert set(metrics) == set(JUDGES)
    m = metrics["execution"]
    # rewards 0.2+0.1e and 0.4+0.1e over e = 0..4, each 0.1 higher at e = 3
    boost = [0.1 if e == 3 else 0.0 for e in range(5)]
    rewards = [0.2 + 0.1 * e + boost[e] for e in range(5)] + [
        0.4 + 0.1 * e + boost[e] for e in range(5)
    ]
    assert m["reward"]["n"] == 10
    assert m["reward"]["mean"] == pytest.approx(sum(rewards) / 10)
    assert m["epochs"] == 4 and m["steps"] == 4
    held = m["heldout"]
    assert (held["base"], held["final"], held["delta"]) == (1.0, 0.5, -0.5)
    assert held["n_tasks"] == 2
    lo, hi = held["delta_ci"]
    assert lo <= -0.5 <= hi <= 0.0
    assert m["reward"]["std"] == pytest.approx(statistics.stdev(rewards))  # one definition
    assert m["train_pass_rate"] == pytest.approx(0.3)  # 1 of 2 at epochs 0-2, 0 at 3-4
    # epoch 3: reward +0.2 while the same samples' pass rate fell 0.5 -> 0 (margin 0.1);
    # epoch 4's reward rose by 0 only, so it is not flagged although held-out stayed low
    assert m["reward_hacking_epochs"] == 1 and m["truth_unscored"] == 0
    rows = training.table_rows(metrics)
    assert rows[0][0] == "execution" and rows[0][-2] == "1"
    md = "\n".join(training.markdown_section({"training": metrics}))
    assert "| execution | 4 |" in md and "Reward-hacking alarm on 1 epoch" in md
    assert "test pass rate of the same training samples" in md  # says what it compares
    html = "\n".join(training.html_section({"training": metrics}, str))
    assert 'id="training"' in html


def test_curves_frame_and_plot(tmp_path: Path) -> None:
    write_training_histories(tmp_path, JUDGES)
    frame = training.curves_frame(tmp_path)
    assert frame.height == 2 * 5 * 3  # judges x epochs x metrics
    assert training.plot_curves(tmp_path, tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert not training.plot_curves(tmp_path / "none", tmp_path / "d.png")


def test_no_training_says_so() -> None:
    assert "No training run" in "\n".join(training.markdown_section({}))


def test_configured_training_without_output_is_not_called_unconfigured(tmp_path: Path) -> None:
    """Missing output is not "not configured" (issue 18): it says which judges lack it."""
    md = "\n".join(training.markdown_section({"train_judges": ["execution", "ruler"]}))
    assert "No training run" not in md
    assert "train.judges names execution, ruler, but the training stage's output" in md
    write_training_histories(tmp_path, ("execution",))
    partial = {
        "train_judges": ["execution", "ruler"],
        "training": training.training_metrics(tmp_path, AnalysisSettings(bootstrap=0)),
    }
    md = "\n".join(training.markdown_section(partial))
    assert "| execution |" in md and "train.judges names ruler, but" in md
    html = "\n".join(training.html_section(partial, str))
    assert "train.judges names ruler" in html


def test_heldout_choice_is_reported(tmp_path: Path) -> None:
    import json

    write_training_histories(tmp_path, JUDGES)
    (tmp_path / "heldout.json").write_text(json.dumps({
        "pool": ["HumanEval/2", "HumanEval/3", "HumanEval/4"],
        "base_pass_rate": {"HumanEval/2": 1.0, "HumanEval/3": 0.5, "HumanEval/4": 1.0},
        "heldout": ["HumanEval/2", "HumanEval/3"], "filled": ["HumanEval/2"],
    }))  # fmt: skip
    metrics = training.training_metrics(tmp_path, AnalysisSettings(bootstrap=0))
    assert metrics["execution"]["heldout"]["selection"]["tasks"] == ["HumanEval/2", "HumanEval/3"]
    md = "\n".join(training.markdown_section({"training": metrics}))
    assert "HumanEval/3 (0.50)" in md and "pool of 3" in md
    assert "HumanEval/2 filled in (too few tasks of the pool were mixed)" in md


def test_heldout_ci_needs_min_groups_and_prose_claims_no_change(tmp_path: Path) -> None:
    """17.1 and 17.3: two held-out tasks give no CI, and the finding claims no change."""
    write_training_histories(tmp_path, JUDGES)
    metrics = training.training_metrics(tmp_path, AnalysisSettings(bootstrap=500))
    held = metrics["execution"]["heldout"]
    assert (held["base"], held["final"], held["delta"]) == (1.0, 0.5, -0.5)
    assert held["base_ci"] is None and held["final_ci"] is None and held["delta_ci"] is None
    assert held["ci_reason"] == "n = 2 groups: too few for a CI (minimum 5)"
    md = "\n".join(training.markdown_section({"training": metrics}))
    assert "-50 pp (n = 2 groups: too few for a CI (minimum 5))" in md
    assert "no change can be claimed" in md and "the CI includes 0" not in md
