"""The truth figures' CIs (analysis.stats.cluster_ci) against independent implementations and
hand-computed cases: the jackknife t interval against scipy's t interval of a mean, Wilson's
interval at the effective size by hand, the studentized bootstrap against a loop over
resamples written here from its definition."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from judgelab.analysis.stats import bootstrap_t_ci, cluster_ci, resample_weights, t_ci, wilson_ci

Z = scipy_stats.norm.ppf(0.975)


def _leave_one_out_means(x: np.ndarray) -> np.ndarray:
    return np.array([np.delete(x, i).mean() for i in range(x.size)])


def test_jackknife_t_of_a_mean_is_scipys_t_interval() -> None:
    x = np.array([0.2, 0.9, 0.4, 0.7, 0.1, 0.55])
    ci = t_ci(float(x.mean()), _leave_one_out_means(x), x.size, 5)
    low, high = scipy_stats.t.interval(0.95, x.size - 1, loc=x.mean(), scale=scipy_stats.sem(x))
    assert (ci.low, ci.high) == pytest.approx((low, high))
    assert ci.n_groups == 6 and ci.undefined_resamples == 0
    few = t_ci(float(x.mean()), _leave_one_out_means(x), x.size, 7)
    assert few.reason == "n = 6 groups: too few for a CI (minimum 7)"


def test_wilson_at_the_effective_size_by_hand() -> None:
    # 5 clusters of 4 pairs, every pair right: no variance, all 20 pairs -> [20/(20+z^2), 1]
    ci = wilson_ci(1.0, np.ones(5), 20, 5, 5)
    assert ci.low == pytest.approx(20 / (20 + Z**2)) and ci.high == 1.0
    # 0.6 with a jackknife variance of 4/5 * 4 * 0.008 = 0.0256: n_eff = 0.24 / 0.0256 = 9.375
    jack = np.array([0.6 + 0.1 * np.sqrt(4 / 5) * s for s in (1, -1, 1, -1)] + [0.6])
    var = 4 / 5 * np.sum((jack - jack.mean()) ** 2)
    assert var == pytest.approx(0.0256)
    n_eff = 0.24 / var
    centre = (0.6 + Z**2 / (2 * n_eff)) / (1 + Z**2 / n_eff)
    half = Z * np.sqrt(0.24 / n_eff + Z**2 / (4 * n_eff**2)) / (1 + Z**2 / n_eff)
    ci = wilson_ci(0.6, jack, 40, 5, 5)
    assert (ci.low, ci.high) == pytest.approx((centre - half, centre + half))
    # the effective size never exceeds the units: a tiny variance gives Wilson at 40
    ci = wilson_ci(0.6, np.full(5, 0.6) + 1e-9 * np.arange(5), 40, 5, 5)
    assert ci.high - ci.low == pytest.approx(2 * Z * np.sqrt(0.24 / 40 + Z**2 / 6400)
                                             / (1 + Z**2 / 40))  # fmt: skip


def test_bootstrap_t_against_a_loop_over_resamples() -> None:
    """For cluster means (den = 1) the delta-method SE is the sample SE: t_b is the ordinary
    t statistic of each resample; the interval's ends are the mean minus its quantiles x SE."""
    rng = np.random.default_rng(3)
    x = rng.beta(5, 1, size=8)  # skewed towards its bound, as a sharp judge's figure
    w = resample_weights(x.size, 400, 1)
    ci = bootstrap_t_ci(x, np.ones_like(x), w, 5)
    se = x.std(ddof=1) / np.sqrt(x.size)
    ts = []
    for row in w.astype(int):
        sample = np.repeat(x, row)
        se_b = sample.std(ddof=1) / np.sqrt(sample.size)
        ts.append((sample.mean() - x.mean()) / se_b)
    lo_t, hi_t = np.quantile(ts, [0.025, 0.975], method="inverted_cdf")
    assert (ci.low, ci.high) == pytest.approx((x.mean() - hi_t * se, x.mean() - lo_t * se))
    assert ci.low < x.mean() < ci.high and ci.undefined_resamples == 0
    # skewed data: the interval reaches further below the mean than above it
    assert x.mean() - ci.low > ci.high - x.mean()


def test_bootstrap_t_resamples_with_no_spread_and_bounds() -> None:
    """A resample whose clusters all agree has no SE of its own: it is studentized by the
    sample's SE (by hand below), so many equal tasks do not push an end to the bound."""
    x = np.array([0.0] * 7 + [-0.4, 0.3, -0.5])  # a judge that gives most groups no signal
    w = resample_weights(x.size, 300, 0)
    ci = bootstrap_t_ci(x, np.ones_like(x), w, 5)
    se = x.std(ddof=1) / np.sqrt(x.size)
    ts = []
    for row in w.astype(int):
        sample = np.repeat(x, row)
        se_b = sample.std(ddof=1) / np.sqrt(sample.size)
        ts.append((sample.mean() - x.mean()) / (se_b if se_b > 0 else se))
    assert sum(np.repeat(x, row).std() == 0 for row in w.astype(int)) > 0  # such resamples
    lo_t, hi_t = np.quantile(ts, [0.025, 0.975], method="inverted_cdf")
    assert (ci.low, ci.high) == pytest.approx((x.mean() - hi_t * se, x.mean() - lo_t * se))
    assert -1.0 < ci.low < x.mean() < ci.high < 1.0
    clipped = cluster_ci(float(x.mean()), _leave_one_out_means(x), x.size, 5,
                         ratio=(x, np.ones_like(x)), weights=w, bounds=(-0.2, 1.0))  # fmt: skip
    assert clipped.low == -0.2 and clipped.high == ci.high
    same = bootstrap_t_ci(np.ones(6), np.ones(6), w[:, :6], 5)
    assert same.reason == "all 6 groups give the same value: no spread for a CI"
    none = bootstrap_t_ci(x, np.ones_like(x), None, 5)
    assert none.reason == "bootstrap disabled (bootstrap = 0)"
