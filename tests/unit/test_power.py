"""Power: the sample-size formula by hand, the delta-method variance against the
bootstrap it stands in for, the report's plain verdict and `judgelab power`."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from judgelab.analysis.metrics import compute_metrics
from judgelab.analysis.power import compare, groups_needed, linearised
from judgelab.analysis.stats import resample_weights
from judgelab.config import AnalysisSettings, PowerSettings
from judgelab.report.outputs import run_analysis
from judgelab.schemas import ScoresSchema, columns
from tests.unit.test_analysis import (
    RULE,
    fixture_rollouts,
    fixture_scores,
    fixture_tasks,
    row,
)

ROOT = Path(__file__).resolve().parents[2]


def _fixed_point(
    n: int, var: float, margin: float, alpha: float = 0.05, power: float = 0.8
) -> bool:
    from scipy import stats as st

    t_sum = st.t.ppf(1 - alpha / 2, n - 1) + st.t.ppf(power, n - 1)
    return n == math.ceil(t_sum**2 * var / margin**2)


def test_groups_needed_by_hand() -> None:
    # The normal approximation first: z_0.975 = 1.959964, z_0.8 = 0.841621,
    # (2.801585 * 0.2 / 0.05)^2 = 125.58 -> 126; then t quantiles with n - 1 df raise it:
    # (t_0.975,127 + t_0.8,127)^2 * 16 = (1.978820 + 0.844461)^2 * 16 = 127.5 -> 128.
    assert groups_needed(0.2, 0.05) == 128 and _fixed_point(128, 0.04, 0.05)
    # independent, two judges with SD 0.2 each: 251.16 under z, 254 under t
    assert groups_needed(0.2, 0.05, sd_other=0.2) == 254 and _fixed_point(254, 0.08, 0.05)
    # alpha 0.01, power 0.9: 14.88 -> 15 under z; (t_0.995,17 + t_0.9,17)^2 = 17.9 -> 18
    assert groups_needed(0.1, 0.1, alpha=0.01, power=0.9) == 18
    assert _fixed_point(18, 0.01, 0.1, alpha=0.01, power=0.9)


def test_linearised_is_the_paired_difference_with_equal_pairs() -> None:
    rng = np.random.default_rng(0)
    pairs = np.full(8, 4.0)
    ca, cb = rng.integers(0, 5, 8).astype(float), rng.integers(0, 5, 8).astype(float)
    u = linearised(ca, pairs) - linearised(cb, pairs)
    d = ca / 4 - cb / 4
    assert u == pytest.approx(d - d.mean())


def test_delta_method_variance_matches_the_cluster_bootstrap() -> None:
    """The SD the formula uses, over sqrt(n), is the bootstrap SD of the difference."""
    rng = np.random.default_rng(3)
    n = 300
    pairs = rng.integers(1, 9, n).astype(float)
    ca = rng.binomial(pairs.astype(int), rng.uniform(0.5, 0.9, n)).astype(float)
    cb = rng.binomial(pairs.astype(int), rng.uniform(0.4, 0.8, n)).astype(float)
    u = linearised(ca, pairs) - linearised(cb, pairs)
    w = resample_weights(n, 4000, 5)
    boot = (w @ ca) / (w @ pairs) - (w @ cb) / (w @ pairs)
    assert np.std(u, ddof=1) / math.sqrt(n) == pytest.approx(np.std(boot), rel=0.08)


def test_compare_t_interval_and_p_by_hand_and_against_scipy() -> None:
    """With one pair count per task the comparison is a paired t-test on the per-task
    differences: scipy's ttest_rel gives the same p, and the interval excludes 0 exactly
    when p < 0.05."""
    from scipy import stats as st

    knobs = PowerSettings()
    pairs = np.full(12, 4.0)
    good = np.r_[np.full(6, 4.0), np.full(6, 3.0)]
    bad = np.r_[np.full(3, 1.0), np.full(6, 2.0), np.full(3, 4.0)]
    out = compare((good, pairs), (bad, pairs), knobs, RULE)
    d = good / 4 - bad / 4
    ref = st.ttest_rel(good / 4, bad / 4)
    assert out["difference"] == pytest.approx(d.mean())
    assert out["p_value"] == pytest.approx(ref.pvalue)
    half = st.t.ppf(0.975, 11) * np.std(d, ddof=1) / math.sqrt(12)
    assert out["difference_ci_low"] == pytest.approx(d.mean() - half)
    assert (out["difference_ci_low"] > 0) == (out["p_value"] < 0.05)
    sd = np.std(d, ddof=1)
    assert out["sd_difference"] == pytest.approx(sd)
    assert out["groups_needed_margin"] == groups_needed(sd, 0.05)
    assert _fixed_point(out["groups_needed_margin"], sd**2, 0.05)
    assert "groups_needed_observed" not in out  # no post-hoc power at the observed gap
    # TOST at the margin 0.05: two one-sided t-tests of the per-task differences, by scipy
    lower = st.ttest_1samp(d, -0.05, alternative="greater").pvalue
    upper = st.ttest_1samp(d, 0.05, alternative="less").pvalue
    assert out["p_equivalence"] == pytest.approx(max(lower, upper))
    assert out["p_holm"] is None and out["separated"] is False  # Holm runs over all pairs


def test_below_the_minimum_no_interval_and_no_power_figure() -> None:
    """Four shared tasks give neither a CI nor a tasks-needed figure (a variance from so few
    is no basis for either), and the reason says how many tasks it needs."""
    pairs = np.full(4, 4.0)
    few = compare((np.full(4, 4.0), pairs), (np.r_[1.0, 1, 2, 2], pairs), PowerSettings(), RULE)
    assert few["difference_ci_low"] is None and few["p_value"] is None and few["too_small"]
    assert few["difference_ci_reason"] == "n = 4 groups: too few for a CI (minimum 5)"
    assert few["groups_needed_margin"] is None and few["tasks_to_decide"] is None
    assert few["p_equivalence"] is None
    assert few["power_reason"] == (
        "cannot estimate yet: n = 4 shared tasks; the variance needs at least 5"
    )


def test_report_says_plainly_the_audit_cannot_estimate_yet(tmp_path: Path) -> None:
    settings = AnalysisSettings(bootstrap=200, seed=7, min_ci_groups=5)
    metrics = run_analysis(
        fixture_tasks(), fixture_rollouts(), fixture_scores(), settings, tmp_path
    )
    power = metrics["power"]
    assert power["can_rank"] is False and power["n_comparisons"] == 0
    assert power["endpoint"] == "signal_fidelity" and power["correction"] == "holm"
    assert {a: set(bs) for a, bs in power["pairs"].items()} == {"dead": {"judge", "rub"},
                                                                "judge": {"rub"}}  # fmt: skip
    md = (tmp_path / "report.md").read_text()
    assert "## Paired comparisons and power (signal fidelity)" in md
    n_max = max(p["n_groups"] for bs in power["pairs"].values() for p in bs.values())
    assert n_max < settings.min_ci_groups
    assert f"The power analysis cannot estimate yet: the judges share at most {n_max} tasks" in md
    assert f"({power['units']}); it needs at least {settings.min_ci_groups} for a pair" in md
    assert "higher (Holm" not in md and "About" not in md


def _many_tasks(n_tasks: int = 40) -> pl.DataFrame:
    rng = np.random.default_rng(2)
    rows = []
    for t in range(n_tasks):
        for c in range(4):
            cid = f"t{t}c{c}"
            passed = float(c < 2)
            rows.append(row(f"t{t}", cid, "tests", "execution", passed))
            rows.append(row(f"t{t}", cid, "sharp", "rubric", round(0.6 * passed + 0.1 * c, 2)))
            rows.append(row(f"t{t}", cid, "noisy", "rubric", round(float(rng.random()), 2)))
    return pl.DataFrame(rows, schema=columns(ScoresSchema))


def test_a_big_enough_audit_ranks_a_pair() -> None:
    scores = _many_tasks()
    tasks = pl.DataFrame({"task_id": [f"t{t}" for t in range(40)]})
    metrics = compute_metrics(tasks, scores.select("candidate_id"), scores,
                              AnalysisSettings(bootstrap=300))  # fmt: skip
    pair = metrics["power"]["pairs"]["noisy"]["sharp"]
    assert pair["n_groups"] == 40 and pair["difference"] < 0 and pair["separated"]
    assert pair["difference_ci_high"] < 0 and pair["p_holm"] < 0.05


def test_power_cli(tmp_path: Path) -> None:
    from judgelab_cli import app

    path = tmp_path / "scores.parquet"
    fixture_scores().write_parquet(path)
    result = CliRunner().invoke(
        app,
        [
            "power",
            "--scores",
            str(path),
            "--params",
            str(ROOT / "params.yaml"),
            "--margin",
            "0.1",
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    assert "margin 0.1" in result.output and "cannot estimate yet" in result.output
