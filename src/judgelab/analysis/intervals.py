"""Figures with their interval over clusters, as the truth figures get theirs: one value and
`stats.Interval`'s fields (`<figure>_ci_low`, `_ci_high`, `_ci_reason`, `_n_groups`, ...), no CI
from fewer than `rule.min_ci_groups` clusters (`stats.CIRule`).

- `figure_with_ci`: any statistic of the cluster indices, the percentile cluster bootstrap
  (`agreement.with_ci`).
- `ratio_with_ci`: sum num / sum den over the clusters with den > 0; a share of units gets
  Wilson's interval at the effective size, any other ratio the studentized cluster bootstrap
  (`stats.cluster_ci`).
- `difference_with_ci`: the difference of two such ratios, R +- t_(n-1) jackknife SE
  (`stats.t_ci`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from judgelab.analysis.agreement import with_ci
from judgelab.analysis.stats import (
    NO_BOOTSTRAP,
    CIRule,
    Interval,
    cluster_ci,
    no_interval,
    resample_weights,
    t_ci,
)


def figure_with_ci(
    name: str,
    n: int,
    stat: Callable[[np.ndarray], float | None],
    rule: CIRule,
) -> dict[str, Any]:
    """`agreement.with_ci`'s fields: {name, name_ci_low, name_ci_high, name_ci_reason, ...},
    the CI only from `rule.min_ci_groups` groups or more."""
    return with_ci(name, n, stat, rule)


def ratio_with_ci(
    name: str,
    num: np.ndarray | list[float],
    den: np.ndarray | list[float],
    rule: CIRule,
    *,
    share: bool = False,
    bounds: tuple[float, float] = (-np.inf, np.inf),
) -> dict[str, Any]:
    """{name: sum num / sum den over the clusters (tasks) with den > 0, **its Interval's
    fields}, the interval the truth figures use (`stats.cluster_ci`): a `share` of units
    (den counts them) gets Wilson's interval at the effective size, which never collapses to
    [0, 0] at 0 of n; any other ratio the studentized cluster bootstrap, clipped to `bounds`.
    `<name>_n_groups` counts the contributing clusters; fewer than `rule.min_ci_groups`: no CI."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    used = den > 0
    num, den = num[used], den[used]
    n = int(used.sum())
    value = float(num.sum() / den.sum()) if n else None
    return {name: value, **_ratio_interval(value, num, den, rule, share, bounds).fields(name)}


def _ratio_interval(value: float | None, num: np.ndarray, den: np.ndarray, rule: CIRule,
                    share: bool, bounds: tuple[float, float]) -> Interval:  # fmt: skip
    n = num.size
    if value is None:
        return no_interval("no cluster contributes: the figure is undefined", n)
    if rule.n_boot == 0:  # as the truth figures: bootstrap = 0 turns every CI off
        return no_interval(NO_BOOTSTRAP, n)
    rest_num, rest_den = num.sum() - num, den.sum() - den
    with np.errstate(divide="ignore", invalid="ignore"):
        jackknife = np.where(rest_den > 0, rest_num / rest_den, np.nan)
    weights = resample_weights(n, rule.n_boot, rule.seed)
    return cluster_ci(value, jackknife, n, rule.min_ci_groups,
                      units=int(den.sum()) if share else None,
                      ratio=None if share else (num, den), weights=weights,
                      bounds=bounds)  # fmt: skip


def difference_with_ci(
    name: str,
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    rule: CIRule,
) -> dict[str, Any]:
    """{name: R_a - R_b, **fields}, each R = sum num / sum den over the clusters where both
    denominators are positive, with the truth figures' interval for a figure that is neither
    a share nor one ratio: R +- t_(n-1) jackknife SE over those clusters (`stats.t_ci`)."""
    (na, da), (nb, db) = (tuple(np.asarray(x, dtype=float) for x in p) for p in (a, b))
    used = (da > 0) & (db > 0)
    na, da, nb, db = na[used], da[used], nb[used], db[used]
    n = int(used.sum())
    value = float(na.sum() / da.sum() - nb.sum() / db.sum()) if n else None
    if value is None:
        interval = no_interval("no cluster contributes: the figure is undefined", n)
    elif rule.n_boot == 0:
        interval = no_interval(NO_BOOTSTRAP, n)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            jackknife = (na.sum() - na) / (da.sum() - da) - (nb.sum() - nb) / (db.sum() - db)
        interval = t_ci(value, jackknife, n, rule.min_ci_groups, rule.level)
    return {name: value, **interval.fields(name)}
