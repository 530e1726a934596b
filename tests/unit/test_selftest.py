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
    coverage,
    empirical_power,
    family_wise_error,
    figures_of,
    simulate_groups,
    true_values,
)

SMALL = SelftestSettings(audits=40, tasks=(30,), bootstrap=200, truth_tasks=3000)


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


def test_small_selftest_recovers_its_planted_judges() -> None:
    rows = coverage(SMALL)
    assert {r["judge"] for r in rows} == set(FAMILY) and all(r["tasks"] == 30 for r in rows)
    interior = [r for r in rows if r["judge"] != "sharp"]  # sharp sits at the 1.0 boundary
    assert all(r["audits_with_ci"] == SMALL.audits for r in interior)
    assert np.mean([r["coverage"] for r in interior]) >= 0.8
    fwe = family_wise_error(SMALL, 30)
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
            "--tasks",
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
    bad = CliRunner().invoke(app, ["selftest", "--tasks", "ten"])
    assert bad.exit_code != 0 and "--tasks" in bad.output
