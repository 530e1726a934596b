"""The planted-judge self-test (analysis.selftest), small: the simulation plants what it says,
the real analysis code recovers it, and `judgelab selftest` prints its tables. The full run
(500 audits per cell) is recorded in docs/SELFTEST.md."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from judgelab.analysis.selftest import (
    FAMILY,
    Planted,
    SelftestSettings,
    bca_interval,
    coverage,
    empirical_power,
    family_wise_error,
    figures_of,
    simulate_audit,
    simulate_groups,
    true_values,
)

SMALL = SelftestSettings(audits=40, clusters=(20,), bootstrap=200, truth_tasks=3000)


def test_planted_truths_by_hand() -> None:
    """A judge with no signal: advantage fidelity 0, top-1 at chance, and strict pairwise
    accuracy (1 - tie rate) / 2, since a tie-free pair is a coin toss."""
    rng = np.random.default_rng(1)
    passed = simulate_groups(2000, 4, rng)
    point, _, _ = figures_of(passed, FAMILY["blind"].score(passed.astype(float), rng))
    assert point["advantage_fidelity"] == pytest.approx(0.0, abs=0.03)
    assert point["top1_over_chance"] == pytest.approx(0.0, abs=0.03)
    assert point["pairwise_accuracy_strict"] == pytest.approx(
        (1 - point["tied_pair_share"]) / 2, abs=0.02
    )
    # a perfect judge: every figure at its ceiling, no tie
    exact = Planted(signal=1.0, noise=0.0, levels=2)
    point, _, _ = figures_of(passed, exact.score(passed.astype(float), rng))
    assert point["pairwise_accuracy_strict"] == 1.0 and point["advantage_fidelity"] == 1.0
    assert point["tied_pair_share"] == 0.0
    # more signal, higher figures
    truths = {n: true_values(FAMILY[n], 4, 1000, rng) for n in ("sharp", "coarse", "blind")}
    for key in ("pairwise_accuracy_strict", "advantage_fidelity", "top1_over_chance"):
        assert truths["sharp"][key] > truths["coarse"][key] > truths["blind"][key], key


def test_audits_hold_exactly_their_mixed_clusters() -> None:
    rng = np.random.default_rng(2)
    for n in (5, 13):
        passed = simulate_audit(n, 4, rng)
        mixed = passed.any(axis=1) & ~passed.all(axis=1)
        assert mixed.sum() == n and mixed[-1]  # the draw stops at the n-th mixed task


def test_bca_by_hand() -> None:
    """Draws symmetric around the point and a symmetric jackknife: z0 = 0 and a = 0, so BCa
    is the percentile interval. A point below most draws (bias z0 < 0) moves both ends down:
    with a = 0 the ends are the draws' quantiles at Phi(2 z0 -+ 1.96)."""
    draws = np.arange(1.0, 100.0)  # 1..99, point 50: half below, one tie
    jack = np.array([1.0, 2.0, 3.0])
    assert bca_interval(50.0, draws, jack) == pytest.approx(
        tuple(np.quantile(draws, [0.025, 0.975])))  # fmt: skip
    from scipy.stats import norm

    z0 = norm.ppf(29.5 / 99)  # 29 draws below 30, one tie
    by_hand = np.quantile(draws, norm.cdf(2 * z0 + norm.ppf([0.025, 0.975])))
    assert bca_interval(30.0, draws, jack) == pytest.approx(tuple(by_hand))
    assert by_hand[0] < np.quantile(draws, 0.025)


def test_small_selftest_recovers_its_planted_judges() -> None:
    rows = coverage(SMALL)
    assert {r["judge"] for r in rows} == set(FAMILY) and all(r["clusters"] == 20 for r in rows)
    used = [r["coverage_used"] for r in rows]
    # the interval in use holds its level better than the percentile one it replaced
    assert np.mean(used) >= 0.85
    assert np.mean(used) > np.mean([r["coverage_percentile"] for r in rows])
    fwe = family_wise_error(SMALL, 20)
    assert fwe["audits_tested"] == SMALL.audits and fwe["family_wise_error"] <= 0.2
    power = empirical_power(SMALL)
    assert power["tasks_needed"] >= 5 and power["power"] >= 0.6


def test_selftest_cli_prints_its_tables(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from judgelab_cli import app

    out = tmp_path / "selftest.json"
    result = CliRunner().invoke(
        app,
        [
            "selftest",
            "--audits",
            "10",
            "--clusters",
            "12",
            "--bootstrap",
            "50",
            "--truth-tasks",
            "1000",
            "--out",
            str(out),
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    assert "Coverage of the 95 % CIs" in result.output and "Family-wise error" in result.output
    assert out.exists()
    bad = CliRunner().invoke(app, ["selftest", "--clusters", "ten"])
    assert bad.exit_code != 0 and "--clusters" in bad.output
