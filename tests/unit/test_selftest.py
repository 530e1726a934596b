"""The planted-judge self-test (analysis.selftest), small: the simulation plants what it says
(per-task skill, ties, unscored candidates, a blind judge), the real analysis code recovers it
and ranks judges planted in order in that order, and `judgelab selftest` prints its tables.
The full run is recorded in docs/SELFTEST.md."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from judgelab.analysis.selftest import (
    COMPARED,
    FAMILY,
    FIGURES,
    LADDER,
    Planted,
    SelftestSettings,
    bca_interval,
    coverage,
    empirical_power,
    family_wise_error,
    figures_of,
    planted_order,
    simulate_audit,
    simulate_groups,
    true_values,
)

SMALL = SelftestSettings(audits=30, clusters=(20,), bootstrap=200, truth_tasks=2000)


def test_planted_truths_by_hand() -> None:
    """A judge blind to the truth but not flat: signal and advantage fidelity 0, top-1 at
    chance, every group the tests do not split noisy, and strict pairwise accuracy
    (1 - tie rate) / 2, since a tie-free pair is a coin toss."""
    rng = np.random.default_rng(1)
    passed = simulate_groups(2000, 4, rng)
    point, _, _ = figures_of(passed, FAMILY["blind"].score(passed.astype(float), rng))
    assert FAMILY["blind"].blind and point["noise_group_rate"] > 0.95
    assert point["signal_fidelity"] == pytest.approx(0.0, abs=0.03)
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
    for key in ("signal_fidelity", "pairwise_accuracy_strict", "advantage_fidelity",
                "top1_over_chance"):  # fmt: skip
        assert truths["sharp"][key] > truths["coarse"][key] > truths["blind"][key], key
    assert truths["blind"]["signal_fidelity"] == 0.0  # known by symmetry, not estimated


def test_planted_skill_ties_and_unscored() -> None:
    """Unscored candidates reach the signal figures as unscored pairs (a pair is scored when
    both are: 1 - 0.7^2 of them are not) and nowhere else; per-task skill spreads the
    judge's per-task correlation with the tests (some tasks inverted); coarse levels tie."""
    rng = np.random.default_rng(3)
    passed = simulate_groups(1500, 8, rng)
    patchy = Planted(signal=0.4, noise=0.2, levels=5, unscored=0.3)
    point, _, parts = figures_of(passed, patchy.score(passed.astype(float), rng))
    assert point["unscored_pair_rate"] == pytest.approx(1 - 0.7**2, abs=0.02)
    scored = parts.n_pass.sum() + parts.n_fail.sum()
    assert scored == pytest.approx(0.7 * passed.size, rel=0.03)
    even, uneven = Planted(signal=0.3), Planted(signal=0.3, skill_sd=0.4)
    corr = {}
    for name, judge in (("even", even), ("uneven", uneven)):
        _, _, parts = figures_of(passed, judge.score(passed.astype(float), rng))
        corr[name] = parts.adv_corr[parts.top_den > 0]
    assert corr["uneven"].std() > 1.3 * corr["even"].std()
    assert (corr["uneven"] < -0.3).mean() > 2 * (corr["even"] < -0.3).mean()
    # the same mean signal, less correlation: it saturates where the skill is high
    assert 0.2 < corr["uneven"].mean() < corr["even"].mean()
    coarse, _, _ = figures_of(passed, FAMILY["coarse"].score(passed.astype(float), rng))
    sharp, _, _ = figures_of(passed, FAMILY["sharp"].score(passed.astype(float), rng))
    assert coarse["tied_pair_rate"] > 0.2 > 3 * sharp["tied_pair_rate"]


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
    got = coverage(SMALL, 8)
    rows = got["figures"]
    assert {(r["judge"], r["figure"]) for r in rows} == {(j, f) for j in FAMILY for f in FIGURES}
    assert all(r["clusters"] == 20 and r["k"] == 8 for r in rows)
    used = [r["coverage_used"] for r in rows]
    # the interval in use holds its level better than the percentile one it replaced
    assert np.mean(used) >= 0.85
    assert np.mean(used) > np.mean([r["coverage_percentile"] for r in rows])
    blind = next(r for r in rows if r["judge"] == "blind" and r["figure"] == "signal_fidelity")
    assert blind["true"] == 0.0 and blind["coverage_used"] >= 0.8
    diffs = got["differences"]
    assert len(diffs) == len(COMPARED) * len(FAMILY) * (len(FAMILY) - 1) // 2
    sharp_blind = next(d for d in diffs if d["pair"] == "sharp - blind"
                       and d["figure"] == "signal_fidelity")  # fmt: skip
    assert sharp_blind["true"] == pytest.approx(true_values(FAMILY["sharp"], 8, 2000,
                                                np.random.default_rng(4))["signal_fidelity"],
                                                abs=0.03)  # fmt: skip
    assert np.mean([d["coverage"] for d in diffs]) >= 0.85
    for fwe in family_wise_error(SMALL, 20, 4):
        assert fwe["audits_tested"] >= SMALL.audits // 2 and fwe["family_wise_error"] <= 0.2
    power = empirical_power(SMALL)
    assert power["tasks_needed"] >= 5 and power["power"] >= 0.6


@pytest.mark.parametrize("k", [4, 8])
def test_planted_judges_come_out_in_their_order(k: int) -> None:
    """Judges alike but for their signal (with per-task skill, ties and unscored candidates)
    rank in their planted order on signal fidelity in a big audit, each separated from the
    next by the Holm-corrected comparison."""
    got = planted_order(SMALL, k)
    assert got["planted"] == list(LADDER)
    assert got["ranked"] == got["planted"] and all(got["separated_from_next"])


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
            "--group-sizes",
            "4",
            "--bootstrap",
            "50",
            "--truth-tasks",
            "1000",
            "--out",
            str(out),
            "--markdown",
            str(tmp_path / "selftest.md"),
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    for table in ("Coverage of the 95 % CIs", "paired-difference", "Family-wise error", "Order"):
        assert table in result.output, table
    assert out.exists() and "Every cell" in (tmp_path / "selftest.md").read_text()
    bad = CliRunner().invoke(app, ["selftest", "--clusters", "ten"])
    assert bad.exit_code != 0 and "--clusters" in bad.output
    bad = CliRunner().invoke(app, ["selftest", "--group-sizes", "1"])
    assert bad.exit_code != 0 and "--group-sizes" in bad.output
