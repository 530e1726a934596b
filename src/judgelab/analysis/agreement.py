"""Agreement between judges: Krippendorff's alpha, Kendall's tau, Cohen's kappa, and the
cluster bootstrap every probe figure uses for its 95 % CI.

Contract (pure numpy; nothing here reads files):
- `krippendorff_alpha_interval(data)`: `data` is (raters, units) with NaN for a missing value.
  Only units with at least two values count (pairable values). With n pairable values,
  D_o = (1/n) * sum_u 1/(m_u - 1) * sum_{i != j in u} (v_i - v_j)^2 and
  D_e = 1/(n (n - 1)) * sum_{i != j over all pairable values} (v_i - v_j)^2; alpha = 1 - D_o/D_e
  (Krippendorff 2011, "Computing Krippendorff's alpha-reliability", interval metric). Null when
  fewer than two pairable values or when D_e = 0 (every value equal).
- `kendall_tau_b(x, y)`: tau-b over pairs (ties in x or y adjust the denominator as in
  scipy.stats.kendalltau's default); null when either ranking is constant or fewer than 2 items.
- `cohen_kappa(a, b)`: unweighted kappa of two label vectors; null when the expected agreement
  is 1 (both raters use one and the same label throughout).
- `cluster_interval(n_clusters, statistic, rule)`: 95 % percentile CI of
  `statistic(idx)` (idx: cluster indices drawn with replacement) using the resample counts of
  `judgelab.analysis.stats.resample_weights`, so every probe and the truth metrics share one
  bootstrap scheme, under the one rule for CIs (`stats.CIRule`: `rule.n_boot` resamples seeded
  by `rule.seed`, no CI from fewer than `rule.min_ci_groups` clusters). Draws where the statistic
  is undefined (None/NaN) are left out of the quantiles and counted (`undefined_resamples`).
  `with_ci` gives the point value with `Interval.fields`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from judgelab.analysis.stats import CIRule, Interval, no_interval, percentile_ci, resample_weights


def _finite_or_none(x: float) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


def krippendorff_alpha_interval(data: np.ndarray | Sequence[Sequence[float]]) -> float | None:
    """Krippendorff's alpha, interval metric; `data` is (raters, units), NaN = missing."""
    arr = np.asarray(data, dtype=float)
    if arr.ndim != 2:
        raise ValueError(f"reliability data must be 2-D (raters, units), got shape {arr.shape}")
    units = [col[np.isfinite(col)] for col in arr.T]
    units = [u for u in units if u.size >= 2]
    if not units:
        return None
    values = np.concatenate(units)
    n = values.size
    d_o = sum(((u[:, None] - u[None, :]) ** 2).sum() / (u.size - 1) for u in units) / n
    d_e = ((values[:, None] - values[None, :]) ** 2).sum() / (n * (n - 1))
    if d_e == 0:
        return None
    return float(1.0 - d_o / d_e)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b of two score vectors over the same items."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"tau needs equal lengths, got {a.shape} and {b.shape}")
    if a.size < 2:
        return None
    i, j = np.triu_indices(a.size, k=1)
    da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    n_a, n_b = np.count_nonzero(da), np.count_nonzero(db)  # pairs not tied in x / in y
    if n_a == 0 or n_b == 0:
        return None
    return float((da * db).sum() / np.sqrt(n_a * n_b))


def cohen_kappa(a: Sequence[object], b: Sequence[object]) -> float | None:
    """Unweighted Cohen's kappa of two raters' labels on the same items."""
    if len(a) != len(b):
        raise ValueError(f"kappa needs equal lengths, got {len(a)} and {len(b)}")
    n = len(a)
    if n == 0:
        return None
    p_o = sum(1 for u, v in zip(a, b, strict=True) if u == v) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[label] * cb[label] for label in ca) / (n * n)
    if p_e >= 1.0:
        return None
    return float((p_o - p_e) / (1.0 - p_e))


def cluster_interval(
    n_clusters: int,
    statistic: Callable[[np.ndarray], float | None],
    rule: CIRule,
) -> Interval:
    """95 % percentile CI of `statistic` under a cluster bootstrap (see module docstring)."""
    if n_clusters < rule.min_ci_groups or rule.n_boot == 0:  # no resampling needed to say why
        return percentile_ci(None, n_clusters, rule)
    weights = resample_weights(n_clusters, rule.n_boot, rule.seed).astype(int)
    base = np.arange(n_clusters)
    draws = [statistic(np.repeat(base, row)) for row in weights]
    return percentile_ci(draws, n_clusters, rule)


def with_ci(
    name: str,
    n_clusters: int,
    statistic: Callable[[np.ndarray], float | None],
    rule: CIRule,
) -> dict[str, float | int | str | None]:
    """{name: the point value on all clusters} and `Interval.fields(name)`: its CI, or why
    there is none, its n of clusters and the resamples where it was undefined."""
    value = statistic(np.arange(n_clusters)) if n_clusters else None
    value = _finite_or_none(value)
    if value is None:
        interval = no_interval("undefined on the full sample", n_clusters)
    else:
        interval = cluster_interval(n_clusters, statistic, rule)
    return {name: value, **interval.fields(name)}
