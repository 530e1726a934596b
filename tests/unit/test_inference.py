"""The decision's hypothesis tests (analysis/inference.py), each against an independent
computation: Holm by hand, TOST and the ratio test against scipy's one-sample t-tests, the
flat-share test against the binomial sum, the interval test by hand, and the tasks that
decide a pair against the t distributions' power."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats as st

from judgelab.analysis.inference import (
    from_intervals,
    holm,
    ratio_above,
    share_above,
    tasks_to_decide,
    tost,
)


def test_holm_by_hand() -> None:
    """Sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04, then the
    running maximum: 0.02, 0.03, 0.06, 0.06 (in the order given)."""
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]) == []


def test_tost_is_two_one_sided_t_tests() -> None:
    rng = np.random.default_rng(3)
    d = rng.normal(0.01, 0.2, size=60)
    se = np.std(d, ddof=1) / math.sqrt(d.size)
    for margin in (0.03, 0.05, 0.1):
        lower = st.ttest_1samp(d, -margin, alternative="greater").pvalue
        upper = st.ttest_1samp(d, margin, alternative="less").pvalue
        assert tost(float(d.mean()), se, d.size, margin) == pytest.approx(max(lower, upper))
    assert tost(0.01, 0.0, 10, 0.05) == 0.0 and tost(0.06, 0.0, 10, 0.05) == 1.0


def test_ratio_above_with_one_unit_per_task_is_a_one_sample_t_test() -> None:
    rng = np.random.default_rng(4)
    c = rng.normal(0.08, 0.3, size=50)
    n, value, p = ratio_above(c, np.ones(50), 0.0, 2)
    assert (n, value) == (50, pytest.approx(c.mean()))
    assert p == pytest.approx(st.ttest_1samp(c, 0.0, alternative="greater").pvalue)
    # the same shares over a constant number of units per task: the same test
    _, _, p4 = ratio_above(4 * c, np.full(50, 4.0), 0.0, 2)
    assert p4 == pytest.approx(p)
    # tasks without a denominator do not count; too few tasks give no p
    assert ratio_above(np.r_[c, 5.0], np.r_[np.ones(50), 0.0], 0.0, 2)[0] == 50
    few = ratio_above(c[:3], np.ones(3), 0.0, min_ci_groups=5)
    assert few == (3, pytest.approx(c[:3].mean()), None)


def test_share_above_is_the_binomial_tail() -> None:
    k, n, p0 = 41, 74, 0.5
    tail = sum(math.comb(n, i) * p0**i * (1 - p0) ** (n - i) for i in range(k, n + 1))
    assert share_above(k, n, p0) == pytest.approx(tail)
    assert share_above(k, n, p0) == pytest.approx(st.binomtest(k, n, p0, "greater").pvalue)
    assert share_above(0, 0, 0.5) is None


def test_from_intervals_by_hand() -> None:
    se = math.hypot(0.1 / 1.959963984540054, 0.1 / 1.959963984540054)
    expected = NormalDist().cdf((0.3 - 0.7) / se)
    assert from_intervals((0.3, 0.2, 0.4), (0.7, 0.6, 0.8)) == pytest.approx(expected)
    assert from_intervals((0.7, 0.6, 0.8), (0.3, 0.2, 0.4)) > 0.99


def test_tasks_to_decide_reach_their_power_and_no_fewer_do() -> None:
    """`above`: the paired t-test's exact power (noncentral t) at a true gap of the margin
    reaches the target at n and not at n - 1... within one task of the iteration;
    `equivalent`: TOST at a true gap of 0 reaches it in simulation."""
    sd, margin, alpha, target = 1.0, 0.4, 0.05, 0.8
    need = tasks_to_decide(sd, margin, alpha, target)

    def power_above(n: int) -> float:
        nc = margin / (sd / math.sqrt(n))
        crit = st.t.ppf(1 - alpha / 2, n - 1)
        return float(st.nct.sf(crit, n - 1, nc))

    assert power_above(need["above"]) >= target - 0.01
    assert power_above(need["above"] - 3) < target
    rng = np.random.default_rng(5)
    n = need["equivalent"]
    draws = rng.normal(0.0, sd, size=(4000, n))
    se = draws.std(axis=1, ddof=1) / math.sqrt(n)
    means = draws.mean(axis=1)
    hits = [tost(float(m), float(s), n, margin) < alpha for m, s in zip(means, se, strict=True)]
    assert np.mean(hits) >= target - 0.02
    assert need["decide"] == max(need["above"], need["equivalent"])
