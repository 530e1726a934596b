"""The hypothesis tests the decision rests on (pure numpy/scipy; nothing here reads a table).

- `holm`: Holm's step-down adjusted p-values over a family, in the order given: the i-th
  smallest p becomes max_{j<=i} min(1, (m - j + 1) p_(j)). Every rule of the rulebook and
  every pair verdict is corrected this way over its own family (docs/METRICS.md).
- `ratio_above`: a one-sided test that a ratio of per-task sums R = sum c / sum m lies above
  a value r0. Its first-order (delta-method) expansion over tasks gives e_t = (c_t - R m_t) /
  mean(m) and SE = sd(e) / sqrt(n) (the variance `power.paired_t` uses for two judges), so
  t = (R - r0) / SE with n - 1 degrees of freedom; p = P(T >= t). With SE = 0 every task
  agrees: p = 0 when R > r0, 1 otherwise. Only tasks with m_t > 0 count.
- `share_above`: the exact one-sided binomial test that a share of independent tasks (k of
  n) lies above p0: p = P(X >= k | n, p0). Used where each task gives one 0/1 (a flat group).
- `from_intervals`: a one-sided z-test that figure A lies below figure B from their two
  95 % CIs alone (SE = half-width / z_0.975 each, the two treated as independent). Two
  figures measured on the same tasks are positively correlated, so their difference varies
  less than this assumes: the test is conservative, never anti-conservative.
- `tost`: Schuirmann's two one-sided tests that a paired difference D (SE, n - 1 df) lies
  within (-margin, +margin): p = max(P(T >= (D + margin) / SE), P(T <= (D - margin) / SE)).
- `tasks_to_decide`: how many tasks a pair needs before one verdict is reached with power
  `power` whatever the truth, at the margin: the larger of the tasks that find a true gap of
  exactly `margin` (two-sided test at `alpha`) and the tasks that call a true gap of 0
  equivalent within `margin` (TOST at `alpha`), by the t-quantile iteration of
  `power.groups_needed`. Never the observed gap: a figure at the observed gap (post-hoc
  power) says nothing the p-value did not.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
from scipy import stats as scipy_stats

__all__ = ["from_intervals", "holm", "ratio_above", "share_above", "tasks_to_decide", "tost"]

Z_95 = NormalDist().inv_cdf(0.975)


def holm(p_values: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given (module docstring)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def ratio_above(
    c: np.ndarray, m: np.ndarray, r0: float, min_ci_groups: int
) -> tuple[int, float | None, float | None]:
    """(n tasks with m_t > 0, R, one-sided p that R > r0); p None below `min_ci_groups` tasks."""
    keep = m > 0
    c, m = c[keep].astype(float), m[keep].astype(float)
    n = int(keep.sum())
    if n == 0:
        return 0, None, None
    ratio = float(c.sum() / m.sum())
    if n < max(2, min_ci_groups):
        return n, ratio, None
    e = (c - ratio * m) / m.mean()
    se = float(np.std(e, ddof=1)) / math.sqrt(n)
    if se <= 0:
        return n, ratio, 0.0 if ratio > r0 + 1e-12 else 1.0
    return n, ratio, float(scipy_stats.t.sf((ratio - r0) / se, n - 1))


def share_above(k: int, n: int, p0: float) -> float | None:
    """P(X >= k) for X ~ Binomial(n, p0): the one-sided p that the share k / n is above p0."""
    if n <= 0:
        return None
    return float(scipy_stats.binom.sf(k - 1, n, p0))


def from_intervals(
    a: tuple[float, float, float], b: tuple[float, float, float]
) -> float | None:
    """One-sided p that figure a lies below figure b, each (value, 95 % CI low, high)."""
    (va, la, ha), (vb, lb, hb) = a, b
    se = math.hypot((ha - la) / (2 * Z_95), (hb - lb) / (2 * Z_95))
    if se <= 0:
        return 0.0 if va < vb else 1.0
    return float(NormalDist().cdf((va - vb) / se))


def tost(diff: float, se: float, n: int, margin: float) -> float:
    """The TOST p-value that |true difference| < margin (module docstring)."""
    if se <= 0:
        return 0.0 if abs(diff) < margin else 1.0
    lower = scipy_stats.t.sf((diff + margin) / se, n - 1)
    upper = scipy_stats.t.cdf((diff - margin) / se, n - 1)
    return float(max(lower, upper))


def _needed(sd: float, margin: float, q_test: float, q_power: float) -> int:
    """Tasks n with (t_{q_test, n-1} + t_{q_power, n-1}) sd / sqrt(n) <= margin."""
    std = NormalDist()
    n = max(2, math.ceil(((std.inv_cdf(q_test) + std.inv_cdf(q_power)) * sd / margin) ** 2))
    for _ in range(100):
        t_sum = float(scipy_stats.t.ppf(q_test, n - 1) + scipy_stats.t.ppf(q_power, n - 1))
        new = max(2, math.ceil((t_sum * sd / margin) ** 2))
        if new == n:
            break
        n = new
    return n


def tasks_to_decide(sd: float, margin: float, alpha: float, power: float) -> dict[str, int]:
    """{"above": tasks to find a true gap of `margin`, "equivalent": tasks to call a true gap
    of 0 equivalent within it, "decide": the larger} (module docstring); `alpha` is the level
    each test is run at (pass alpha / m for the strictest step of Holm over m pairs)."""
    above = _needed(sd, margin, 1 - alpha / 2, power)
    equivalent = _needed(sd, margin, 1 - alpha, 1 - (1 - power) / 2)
    return {"above": above, "equivalent": equivalent, "decide": max(above, equivalent)}
