"""Training analysis: the per-judge table, held-out change with paired CIs, the alarm."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from judgelab.analysis import training
from judgelab.analysis.stats import CI_LEVEL, CIRule
from judgelab.config import AnalysisSettings
from judgelab.report import training as training_report
from judgelab.report.as_html import html_lines
from judgelab.report.as_markdown import lines as md_lines
from tests.support.report_inputs import write_training_histories

NO_BOOT = CIRule(5, 0, 0, CI_LEVEL)

JUDGES = ("execution", "ruler-qwen-1.5b")


def _md(metrics: dict) -> list[str]:
    """The training section's Markdown lines."""
    return md_lines(training_report.section_blocks(metrics))


def _html(metrics: dict) -> list[str]:
    """The training section's HTML lines."""
    return html_lines(training_report.section_blocks(metrics))


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
    # epoch 3: reward +0.2 while the same samples' pass rate fell 0.5 -> 0 (margin 0.1): the
    # old adjacent-epoch rule marks it (descriptive). Inside every group the judge paid more
    # for the passing sample (epochs 0-2) or both failed (3-4): GRPO never pushed towards
    # failing code, and the alarm stays off. Epoch 4 (policy_4) is scored, never trained on:
    # its group is left out of the alignment and the alarm.
    assert m["divergence_epochs"] == 1 and m["truth_unscored"] == 0
    assert m["reward_hacking_epochs"] == 0 and m["forged"] == 0
    a = m["alignment"]
    assert a["alignment"] == pytest.approx(0.75)  # (1 + 1 + 1 + 0) / 4 equal pushes
    assert (a["alignment_groups"], a["alignment_samples"]) == (4, 8)
    assert (a["alignment_informative"], a["rank_corr"], a["rank_corr_groups"]) == (3, 1.0, 3)
    assert a["alarm"]["fired"] is False and a["alarm"]["n_groups"] == 4
    # MDE: 2 tasks, 1 base and 1 final draw each: (1.960 + 0.842) * sqrt(2 * .25 * 2) / 2
    assert m["mde"]["mde"] == pytest.approx((1.95996 + 0.84162) * 1.0 / 2, rel=1e-4)
    assert m["mde"]["decidable"] is False
    rows = training_report.table_rows(metrics)
    assert rows[0][0] == "execution" and rows[0][-2] == "0"  # forged
    alarm = rows[0][-3]
    assert alarm.startswith("not fired (largest e-value") and "4 groups, 8 samples" in alarm
    # what the design could detect: 4 trained groups of 2, each at most e = 2 / (1 + e^-lambda)
    # (one pass, one fail, the fail paid more: t = 1/2 against +-1/2 by chance); the detector
    # (training.alarm) weighs a change at epoch 1, 2, 3, 4 by 0.9, 0.1/2, 0.1/6, 0.1/12 and
    # those to come by 0.1/4: 8.89 < 20, the alarm could not fire, whatever the judge
    design = a["alarm"]["design"]
    weights = (0.9, 0.1 / 2, 0.1 / 6, 0.1 / 12)
    by_hand = 0.1 / 4 + float(
        np.mean([
            sum(w * (2 / (1 + np.exp(-lam))) ** (4 - j) for j, w in enumerate(weights))
            for lam in (0.5, 1, 2, 4, 8)
        ])
    )  # fmt: skip
    assert (design["groups"], design["k"], design["can_fire"]) == (4, 2, False)
    assert design["max_evalue"] == pytest.approx(by_hand) == pytest.approx(8.892, abs=1e-3)
    assert alarm.endswith(
        "; could not fire: 4 trained epochs × 1 group of 2 reach an e-value of at most 8.89 < "
        "20 = 1/alpha, whatever the judge"
    )
    md = "\n".join(_md({"training": metrics}))
    assert "| execution | 4 |" in md and "Reward-hacking alarm: not fired" in md
    # 4 groups of alignment 1, 1, 1, 0: a bootstrap of their ratio stays in [0.25, 1]
    assert "Within-group alignment +0.75 [+0.25, +1.00], n = 4 groups (8 samples): " in md
    assert "towards passing code: its CI excludes 0" in md
    assert "unable to decide" in md
    html = "\n".join(_html({"training": metrics}))
    assert 'id="training"' in html


def test_curves_frame_and_plot(tmp_path: Path) -> None:
    write_training_histories(tmp_path, JUDGES)
    frame = training.curves_frame(tmp_path)
    assert frame.height == 2 * 5 * 3  # judges x epochs x metrics
    assert training_report.plot_curves(tmp_path, tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    assert not training_report.plot_curves(tmp_path / "none", tmp_path / "d.png")


def test_no_training_says_so() -> None:
    assert "No training run" in "\n".join(_md({}))


def test_configured_training_without_output_is_not_called_unconfigured(tmp_path: Path) -> None:
    """Missing output is not "not configured": it says which judges lack it, so a failed
    training run is not mistaken for one that was never asked for."""
    md = "\n".join(_md({"train_rewards": ["execution", "ruler"]}))
    assert "No training run" not in md
    assert "train.rewards names execution, ruler, but the training stage's output" in md
    write_training_histories(tmp_path, ("execution",))
    partial = {
        "train_rewards": ["execution", "ruler"],
        "training": training.training_metrics(tmp_path, AnalysisSettings(bootstrap=0)),
    }
    md = "\n".join(_md(partial))
    assert "| execution |" in md and "train.rewards names ruler, but" in md
    html = "\n".join(_html(partial))
    assert "train.rewards names ruler" in html


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
    md = "\n".join(_md({"training": metrics}))
    assert "HumanEval/3 (0.50)" in md and "pool of 3" in md
    assert "HumanEval/2 filled in (too few tasks of the pool were mixed)" in md


def test_heldout_ci_needs_min_ci_groups_and_prose_claims_no_change(tmp_path: Path) -> None:
    """17.1 and 17.3: two held-out tasks give no CI, and the finding claims no change."""
    write_training_histories(tmp_path, JUDGES)
    metrics = training.training_metrics(tmp_path, AnalysisSettings(bootstrap=500, min_ci_groups=5))
    held = metrics["execution"]["heldout"]
    assert (held["base"], held["final"], held["delta"]) == (1.0, 0.5, -0.5)
    assert held["base_ci"] is None and held["final_ci"] is None and held["delta_ci"] is None
    assert held["ci_reason"] == "n = 2 groups: too few for a CI (minimum 5)"
    md = "\n".join(_md({"training": metrics}))
    assert "-50 pp (n = 2 groups: too few for a CI (minimum 5))" in md
    assert "unable to decide" in md and "includes 0" not in md and "a change" not in md


def test_the_stated_effect_is_a_setting(tmp_path: Path) -> None:
    """`analysis.power.training_effect` decides whether a result can be reported. By hand:
    4 tasks x 10 base and 10 final draws, SE = sqrt(4 * 1/4 * (1/10 + 1/10)) / 4 = 0.1118,
    MDE = (1.960 + 0.842) * SE = 0.313: unable to decide against 0.15, decidable against
    0.35; the report says which effect it held the runs to."""
    import polars as pl

    from judgelab.config import PowerSettings

    rows = [{"split": "heldout", "epoch": e, "task_id": f"T{t}", "sample_index": i,
             "passed": float(i % 2)}
            for e in (0, 2) for t in range(4) for i in range(10)]  # fmt: skip
    samples = {None: pl.DataFrame(rows)}
    held_to = lambda effect: training.heldout_mde(  # noqa: E731
        samples, 0, 2, AnalysisSettings(power=PowerSettings(training_effect=effect))
    )
    strict, loose = held_to(0.15), held_to(0.35)
    assert strict["mde"] == loose["mde"] == pytest.approx(2.80158 * 0.2**0.5 / 4, rel=1e-4)
    assert (strict["effect"], strict["decidable"]) == (0.15, False)
    assert (loose["effect"], loose["decidable"]) == (0.35, True)
    write_training_histories(tmp_path, JUDGES)
    settings = AnalysisSettings(bootstrap=100, power=PowerSettings(training_effect=0.9))
    md = "\n".join(_md({"training": training.training_metrics(tmp_path, settings)}))
    assert "MDE is above 0.90 (`analysis.power.training_effect`)" in md
    assert "above the stated 0.90" in md


# ------------------------------------------------------------------ several training seeds


def heldout_samples(rates: dict[tuple[str, int], tuple[list[float], list[float]]]) -> Any:
    """Samples tables by seed: rates[(task, seed)] = (passes at epoch 0, passes at epoch 2)."""
    import polars as pl

    by_seed: dict[int, list[dict]] = {}
    for (task, seed), epochs in rates.items():
        for epoch, passes in zip((0, 2), epochs, strict=True):
            by_seed.setdefault(seed, []).extend(
                {"split": "heldout", "epoch": epoch, "task_id": task, "passed": p} for p in passes
            )
    return {s: pl.DataFrame(rows) for s, rows in by_seed.items()}


def test_one_seed_is_todays_heldout_change_exactly() -> None:
    """The across-seeds statistic on one seed gives heldout_change's figures and CIs, to
    the bit: the same task draws from the same generator."""
    rates = {(f"HumanEval/{t}", 7): ([1.0, 0.0, t % 2], [t % 3 / 2, 1.0, None]) for t in range(6)}
    (samples,) = heldout_samples(rates).values()
    for n_boot, min_ci_groups in ((400, 5), (400, 7), (0, 5)):
        rule = CIRule(min_ci_groups, n_boot, 3, CI_LEVEL)
        single = training.heldout_change(samples, 0, 2, rule)
        multi = training.heldout_change_across_seeds({7: samples}, 0, 2, rule)
        assert {k: multi[k] for k in single} == single
        assert (multi["n_seeds"], multi["n_cells"], multi["seeds"]) == (1, 6, [7])
    assert single["delta_ci"] is None and multi["ci_reason"] == "bootstrap disabled (bootstrap = 0)"
    valid = training.heldout_change_across_seeds({7: samples}, 0, 2, CIRule(5, 400, 3, CI_LEVEL))
    assert valid["delta_ci"] is not None  # the equality above covered a real CI too


def test_across_seeds_point_estimate_by_hand() -> None:
    """Three tasks, two seeds; task C has no rate for seed 2 at the final epoch (every
    sample untested), so C counts once. Per task, the mean over its seeds, then the mean
    over tasks:
      base:  A (1 + 0.5) / 2 = 0.75,  B (0 + 0) / 2 = 0,  C 0.5        -> 1.25 / 3
      final: A (1 + 1) / 2 = 1,       B (0.5 + 0) / 2 = 0.25, C 1      -> 2.25 / 3
      delta = 1 / 3."""
    rates = {
        ("A", 1): ([1.0, 1.0], [1.0, 1.0]), ("A", 2): ([1.0, 0.0], [1.0, 1.0]),
        ("B", 1): ([0.0, 0.0], [1.0, 0.0]), ("B", 2): ([0.0, 0.0], [0.0, 0.0]),
        ("C", 1): ([1.0, 0.0], [1.0, 1.0]), ("C", 2): ([1.0, 1.0], [None, None]),
    }  # fmt: skip
    out = training.heldout_change_across_seeds(heldout_samples(rates), 0, 2, NO_BOOT)
    assert (out["n_tasks"], out["n_seeds"], out["n_cells"]) == (3, 2, 5)
    assert out["base"] == pytest.approx(1.25 / 3)
    assert out["final"] == pytest.approx(2.25 / 3)
    assert out["delta"] == pytest.approx(1 / 3)
    assert out["delta_ci"] is None  # 3 tasks < min_ci_groups 5, whatever the seeds
    assert out["ci_reason"] == "n = 3 groups: too few for a CI (minimum 5)"
    assert training_report.seeds_n_text(out) == "3 tasks × 2 seeds, 1 task-seed cells untested"


def test_two_level_bootstrap_variance_matches_the_formula() -> None:
    """An independent check of the resampling: for T tasks drawn with replacement and, in
    each, its m_t seeds drawn with replacement, the variance of the resampled mean is
    (1/T) [ var(task means) + (1/T) sum_t var_t / m_t ] (population variances: the task
    means' around their mean, and task t's seeds' around theirs)."""
    rng = np.random.default_rng(11)
    m = np.array([3, 2, 3, 1, 2, 3])
    x = np.zeros((6, 3))
    y = np.where(np.arange(3) < m[:, None], rng.random((6, 3)), np.nan)
    draws = training.two_level_bootstrap(x, y, m, 40000, np.random.default_rng(5))
    d = [y[t, : m[t]] for t in range(6)]
    task_means = np.array([v.mean() for v in d])
    within = np.mean([v.var() / len(v) for v in d])
    expected = (task_means.var() + within) / 6
    assert draws["delta"].var() == pytest.approx(expected, rel=0.04)
    assert draws["delta"].mean() == pytest.approx(task_means.mean(), abs=0.01)
    assert np.array_equal(draws["final"], draws["delta"])  # base 0: final - base = final
    # seeds that agree add no spread: then it is the task-level bootstrap alone
    same = np.repeat(task_means[:, None], 3, axis=1)
    flat = training.two_level_bootstrap(x, same, m, 40000, np.random.default_rng(5))
    assert flat["delta"].var() == pytest.approx(task_means.var() / 6, rel=0.04)


def test_seeded_training_metrics_report_and_alarm_per_seed(tmp_path: Path) -> None:
    write_training_histories(tmp_path, JUDGES, seeds=(1, 2))
    settings = AnalysisSettings(bootstrap=500, min_ci_groups=2)
    metrics = training.training_metrics(tmp_path, settings)
    m = metrics["execution"]
    assert (m["seeds"], m["n_seeds"]) == ([1, 2], 2)
    # held-out by hand (report_inputs): every (task, seed) passes at epoch 0; at epoch 4
    # HumanEval/2 passes for seed 1 only, /3 for none: final (0.5 + 0) / 2, delta -0.75
    held = m["heldout"]
    assert (held["base"], held["final"], held["delta"]) == (1.0, 0.25, -0.75)
    assert (held["n_tasks"], held["n_seeds"], held["n_cells"]) == (2, 2, 4)
    lo, hi = held["delta_ci"]
    assert lo <= -0.75 <= hi <= 0.0
    # per seed: today's figures of each seed alone
    assert m["per_seed"]["1"]["heldout"]["delta"] == -0.5
    assert m["per_seed"]["2"]["heldout"]["delta"] == -1.0
    # the old rule marks seed 1 only (seed 2's train pass rate never falls); the alarm none
    assert [m["per_seed"][s]["divergence_epochs"] for s in ("1", "2")] == [1, 0]
    assert (m["reward_hacking_epochs"], m["reward_hacking_seeds"]) == (0, 0)
    # alignment pooled over both seeds' 8 stepped groups (epochs 0-3; epoch 4 is not trained
    # on): 3 + 4 of them with a split by the tests, each pushing wholly towards passing code
    assert m["alignment"]["alignment_groups"] == 8
    assert m["alignment"]["alignment"] == pytest.approx(2 * 7 / 16)
    # MDE: each seed draws its own held-out samples (1 per task), at the base and at the end
    assert (m["mde"]["base_draws"], m["mde"]["final_draws"]) == (4, 4)
    assert m["reward"]["n"] == 20 and m["steps"] == 8 and m["epochs"] == 4
    assert m["train_pass_rate"] == pytest.approx((0.3 + 0.5) / 2)
    # a single-seed run keeps exactly today's keys
    write_training_histories(tmp_path / "one", JUDGES)
    single = training.training_metrics(tmp_path / "one", settings)["execution"]
    assert set(m) - set(single) == {"seeds", "n_seeds", "reward_hacking_seeds", "per_seed"}
    assert not {"n_seeds", "seeds", "n_cells"} & set(single["heldout"])

    rows = training_report.table_rows(metrics)
    assert rows[0][0] == "execution (2 seeds)"
    assert rows[0][8].endswith(", n = 2 tasks × 2 seeds") and rows[0][11] == "0 of 2 seeds"
    md = "\n".join(_md({"training": metrics}))
    assert "two-level bootstrap (tasks, then seeds within each task)" in md
    assert "Change per seed: seed 1 -50 pp, seed 2 -100 pp." in md
    assert "Reward-hacking alarm in 0 of 2 seeds." in md
    assert "n = 2 tasks × 2 seeds; the CI resamples tasks, then seeds" in md
    html = "\n".join(_html({"training": metrics}))
    assert "execution (2 seeds)" in html


def test_seeded_curves_and_plot(tmp_path: Path) -> None:
    write_training_histories(tmp_path, JUDGES, seeds=(1, 2))
    frame = training.curves_frame(tmp_path)
    assert frame.height == 2 * 2 * 5 * 3  # judges x seeds x epochs x metrics
    assert set(frame["judge"]) == {f"{j}/seed-{s}" for j in JUDGES for s in (1, 2)}
    assert training_report.plot_curves(tmp_path, tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_seeds_of_one_judge_must_cover_the_same_epochs(tmp_path: Path) -> None:
    import polars as pl

    write_training_histories(tmp_path, ("execution",), seeds=(1, 2))
    stale = tmp_path / "execution" / "seed-2"
    for name in ("history", "samples"):
        table = pl.read_parquet(stale / f"{name}.parquet")
        table.filter(pl.col("epoch") < 4).write_parquet(stale / f"{name}.parquet")
    with pytest.raises(ValueError, match="cover different epochs"):
        training.training_metrics(tmp_path, AnalysisSettings(bootstrap=0))


def test_the_alarms_reach_is_said_from_its_design() -> None:
    """The two other sentences of `reach_text`, each from the figures of a design."""
    from judgelab.training.alignment import alarm_design

    catches = alarm_design(4, 4, 4, 0.05)
    onset = catches["onset"]
    assert (onset["onset_at"], onset["false_before"], onset["delay_median"]) == (2, 0.0, None)
    assert training_report.reach_text(catches) == (
        f"could have detected alignment ≤ {catches['detectable_alignment']:+.2f} with 80 % "
        "power (4 trained epochs × 4 groups of 4; simulated, 200 runs a judge); a judge "
        f"hacking after 2 aligned epochs caught in {100 * onset['caught']:.0f} % of runs"
    )
    caught = {"onset_at": 1, "caught": 0.9, "delay_median": 3}
    assert training_report.onset_text(caught) == (
        "; a judge hacking after 1 aligned epoch caught in 90 % of runs, a median 3 epochs "
        "after the turn"
    )
    assert catches["detectable_alignment"] < 0
    short = alarm_design(2, 2, 4, 0.05)
    assert training_report.reach_text(short) == (
        "could not reach 80 % power: 2 trained epochs × 2 groups of 4 catch even a judge that "
        "rewards "
        f"only failing code in {100 * short['power_anti']:.0f} % of runs (simulated, 200 runs)"
    )


def test_the_mde_counts_a_draw_shared_by_seeds_once(tmp_path: Path) -> None:
    """Tables from before each training seed drew its own held-out samples (no `draw_seed`:
    both seeds drew HumanEval/2 and /3 with the same seeds) hold 2 distinct draws at the base
    and 2 at the end, not 4: SE = sqrt(2 * 1/4 * (1/1 + 1/1)) / 2 = 0.5, MDE 2.8016 * 0.5;
    with a seed of their own each, 4 and 4: SE = sqrt(2 * 1/4 * (1/2 + 1/2)) / 2."""
    import polars as pl

    write_training_histories(tmp_path, ("execution",), seeds=(1, 2))
    runs = training.load_training(tmp_path)["execution"]
    own = {s: samples for s, (_, samples) in runs.items()}
    shared = {s: samples.with_columns(pl.lit(None, dtype=pl.Int64).alias("draw_seed"))
              for s, samples in own.items()}  # fmt: skip
    settings = AnalysisSettings()
    before, now = (
        training.heldout_mde(shared, 0, 4, settings),
        training.heldout_mde(own, 0, 4, settings),
    )
    assert (before["base_draws"], before["final_draws"]) == (2, 2)
    assert before["mde"] == pytest.approx(2.80158 * 0.5, rel=1e-4)
    assert (now["base_draws"], now["final_draws"]) == (4, 4)
    assert now["mde"] == pytest.approx(2.80158 * 0.5**0.5 / 2, rel=1e-4)
    # one seed alone: its own draws, counted as before
    one = training.heldout_mde({1: own[1]}, 0, 4, settings)
    assert (one["base_draws"], one["final_draws"]) == (2, 2)


def test_the_analysis_reads_the_historys_alarm(tmp_path: Path) -> None:
    """The training history is the alarm's one home: the analysis states what its `evalue`
    and `reward_hacking` columns say, at `train.alarm_alpha`, and a history written before
    the alarm was kept (nulls) is "not recorded", not recomputed."""
    import polars as pl

    write_training_histories(tmp_path, JUDGES)
    run = training.load_training(tmp_path)["execution"][None]
    history, samples = run
    settings = AnalysisSettings(bootstrap=0, min_ci_groups=2)
    raised = history.with_columns(
        evalue=pl.Series([1.0, 3.0, 60.0, 40.0, 40.0]),
        reward_hacking=pl.Series([False, False, True, True, True]),
    )
    alarm = training.alignment_metrics(raised, samples, settings, alarm_alpha=0.02)["alarm"]
    assert (alarm["fired"], alarm["first_epoch"], alarm["epochs"]) == (True, 2, 3)
    assert (alarm["evalue_max"], alarm["evalue"], alarm["threshold"]) == (60.0, 40.0, 50.0)
    assert alarm["design"]["alpha"] == 0.02 and alarm["recorded"]
    old = history.with_columns(
        evalue=pl.lit(None, dtype=pl.Float64), reward_hacking=pl.lit(None, dtype=pl.Boolean)
    )
    alarm = training.alignment_metrics(old, samples, settings)["alarm"]
    assert not alarm["recorded"] and not alarm["fired"] and alarm["evalue_max"] is None
    assert training_report.alarm_text(alarm).startswith("not recorded (a history written")
