"""Per-evaluator score statistics: how strict or lenient each evaluator is, and how often it fails.

Contract:
- Input is a scores table in the shape of `judgelab.schemas.ScoresSchema` (one row per task,
  candidate, evaluator, repeat). Nothing here reads files or mutates its input.
- Distribution statistics use only *scored* rows (every repeat counts as one observation);
  unscored rows are never substituted by 0. `std` is the sample standard deviation (ddof=1),
  `q1`/`q3`/`median` use linear interpolation between order statistics (numpy's default, the
  same as pandas and most spreadsheets), `iqr = q3 - q1`.
- Rates are shares of *all* rows of the evaluator: `unscored_rate = n_unscored / n_rows`,
  `out_of_range_rate = rows flagged out_of_range / n_rows` (out-of-range rows may be scored, when
  clipped, or unscored).
- `judge_failure_rate = n_judge_failures / n_rows`: rows left unscored because the judge
  itself failed after its bounded retries (call failed: timeout, 429, 5xx, connection; or a
  reply that could not be turned into scores), as opposed to verdicts on the data such as
  an out-of-range score. A flaky endpoint shows here, never as silently dropped rows.
- `unscored_by_reason` groups unscored rows by the reason's category: the text before the first
  ':', slugged (so "Parse error: unexpected token" and "parse error: empty reply" are both
  `parse_error`),
  with each category's count and its share of the unscored rows.
- An evaluator with no scored rows yields nulls for every distribution statistic and a
  `reason` saying why; it never raises.

Bootstrap CIs (one rule for every figure: truth metrics, agreement, probes, held-out pass rate):
- `CIRule` is that rule, built once from the settings (`CIRule.of`) and passed to every
  function that draws a CI: resamples, seed, level and the fewest groups.
- `too_few_groups(n_groups, min_ci_groups)` is the minimum-clusters rule: a figure computed over
  fewer than `analysis.min_ci_groups` independent groups gets no CI, only its value and
  "n = 2 groups: too few for a CI (minimum 5)". With n groups a cluster bootstrap has only
  C(2n-1, n) distinct resamples (3 for n = 2), so its "interval" is the range of the groups.
- `resample_weights(n_tasks, n_boot, seed)`: the cluster bootstrap's resample counts (how often
  each task appears in each resample), drawn once per analysis and shared by every figure.
- `percentile_ci(draws, n_groups, rule)` is the 95 % percentile CI of bootstrap draws
  under that rule. A draw that is NaN/inf is a resample in which the figure is undefined (no
  mixed pass/fail group, say): it is left out of the quantiles and *counted*
  (`undefined_resamples`), never dropped in silence.
- The truth figures' CIs (`cluster_ci`) are chosen by simulation (docs/SELFTEST.md): a share
  of units (pairs, candidates, groups) gets `wilson_ci`, the Wilson score interval at the
  cluster design effect's effective size (n_eff = p(1 - p) / v, v the leave-one-cluster-out
  jackknife variance, at most the number of units, all of them when v = 0: the interval never
  collapses at 0 or 1; Korn and Graubard 1998's effective size, Wilson's form); a ratio of
  per-cluster sums that is not a share (advantage fidelity, top-1 over chance) gets
  `bootstrap_t_ci`, the studentized cluster bootstrap (each resample's t = (R_b - R) / SE_b,
  SE from the ratio's delta-method terms, the interval R - t_q SE, clipped to the figure's
  range: it follows the skew that a bounded figure has near its bound); any other figure
  gets `t_ci`, R +- t_(n-1) times the jackknife SE. The percentile CI under-covers from 5-20
  clusters (docs/SELFTEST.md).
- `Interval.fields(name)` is the one shape every metrics dict uses beside a figure `name`:
  `name_ci_low`, `name_ci_high` (null without a CI), `name_ci_reason` (why there is none),
  `name_n_groups` and `name_undefined_resamples` (null when no bootstrap ran).
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as scipy_stats

from judgelab.config import AnalysisSettings
from judgelab.errors import JUDGE_CALL_FAILED, JUDGE_REPLY_ERROR

logger = logging.getLogger(__name__)

DISTRIBUTION_KEYS = ("mean", "median", "std", "q1", "q3", "iqr", "min", "max")
REASON_MAX_CHARS = 60
CI_LEVEL = 0.95
CI_SUFFIXES = ("_ci_low", "_ci_high", "_ci_reason", "_n_groups", "_undefined_resamples")
NO_BOOTSTRAP = "bootstrap disabled (bootstrap = 0)"
_FLAT = 1e-12  # an SE this small (relative to the figure) is floating-point noise around 0


@dataclass(frozen=True)
class CIRule:
    """How every bootstrap CI is drawn: `n_boot` cluster resamples seeded by `seed`, at
    `level`, and only from `min_ci_groups` independent groups or more (one group never gives a
    CI, so at least 2)."""

    min_ci_groups: int
    n_boot: int
    seed: int
    level: float

    def __post_init__(self) -> None:
        if self.min_ci_groups < 2:
            raise ValueError(f"min_ci_groups: {self.min_ci_groups}; a CI needs at least 2 groups")
        if self.n_boot < 0:
            raise ValueError(f"n_boot: {self.n_boot}; must be 0 (no CI) or more")

    @classmethod
    def of(cls, analysis: AnalysisSettings) -> CIRule:
        """The analysis settings' rule: `bootstrap`, `seed`, `min_ci_groups`."""
        return cls(analysis.min_ci_groups, analysis.bootstrap, analysis.seed, CI_LEVEL)

    def resampled(self, n_boot: int, seed: int) -> CIRule:
        """The same minimum and level with another stage's resamples (the probes')."""
        return replace(self, n_boot=n_boot, seed=seed)


def too_few_groups(n_groups: int, min_ci_groups: int) -> str | None:
    """Why a figure over `n_groups` independent groups may not have a bootstrap CI, or None
    when it may. The one minimum-clusters rule of judgelab (module docstring)."""
    if n_groups >= min_ci_groups:
        return None
    noun = "group" if n_groups == 1 else "groups"
    return f"n = {n_groups} {noun}: too few for a CI (minimum {min_ci_groups})"


@dataclass(frozen=True)
class Interval:
    """A figure's bootstrap CI, or the reason it has none, with what it was drawn from."""

    low: float | None
    high: float | None
    reason: str | None  # None exactly when low/high are set
    n_groups: int
    undefined_resamples: int | None = None  # None: no bootstrap ran

    @property
    def valid(self) -> bool:
        return self.low is not None and self.high is not None

    def excludes(self, value: float) -> bool:
        """True only when there is a CI and `value` lies outside it."""
        return self.valid and not (self.low <= value <= self.high)  # type: ignore[operator]

    def fields(self, name: str) -> dict[str, Any]:
        return {
            f"{name}_ci_low": self.low,
            f"{name}_ci_high": self.high,
            f"{name}_ci_reason": self.reason,
            f"{name}_n_groups": self.n_groups,
            f"{name}_undefined_resamples": self.undefined_resamples,
        }


def no_interval(reason: str, n_groups: int) -> Interval:
    return Interval(None, None, reason, n_groups)


def resample_weights(n_tasks: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_tasks) counts: how often each task appears in each bootstrap resample."""
    if n_tasks == 0 or n_boot == 0:
        return np.zeros((n_boot, n_tasks), dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n_tasks, size=(n_boot, n_tasks))
    weights = np.zeros((n_boot, n_tasks), dtype=float)
    np.add.at(weights, (np.repeat(np.arange(n_boot), n_tasks), picks.ravel()), 1.0)
    return weights


def percentile_ci(
    draws: np.ndarray | list[float | None] | None,
    n_groups: int,
    rule: CIRule,
) -> Interval:
    """Percentile CI of bootstrap `draws` (one per resample; NaN/inf/None = the figure was
    undefined in that resample) of a figure over `n_groups` groups, at `rule.level`, from
    `rule.min_ci_groups` groups or more. None or no draws: no bootstrap ran."""
    min_ci_groups, level = rule.min_ci_groups, rule.level
    why = too_few_groups(n_groups, min_ci_groups)
    if why:
        return no_interval(why, n_groups)
    arr = np.array([np.nan if d is None else d for d in (draws if draws is not None else [])])
    arr = arr.astype(float)
    if arr.size == 0:
        return no_interval(NO_BOOTSTRAP, n_groups)
    ok = np.isfinite(arr)
    undefined = int(arr.size - ok.sum())
    if not ok.any():
        why = f"undefined in every one of {arr.size} resamples"
        return Interval(None, None, why, n_groups, undefined)
    alpha = (1.0 - level) / 2.0
    low, high = (float(x) for x in np.quantile(arr[ok], [alpha, 1.0 - alpha]))
    return Interval(low, high, None, n_groups, undefined)


def _usable(n_groups: int, min_ci_groups: int, point: float | None) -> str | None:
    why = too_few_groups(n_groups, min_ci_groups)
    if why is None and (point is None or not np.isfinite(point)):
        why = "the figure is undefined"
    return why


def jackknife_variance(values: np.ndarray) -> tuple[float, int]:
    """The jackknife variance (n - 1) / n * sum (v_i - mean)^2 of leave-one-cluster-out
    values, from the finite ones, and how many were undefined (left out, counted)."""
    arr = np.asarray(values, dtype=float)
    ok = arr[np.isfinite(arr)]
    n = ok.size
    var = float((n - 1) / n * np.sum((ok - ok.mean()) ** 2)) if n >= 2 else float("nan")
    return var, int(arr.size - n)


def t_ci(
    point: float | None, jackknife: np.ndarray, n_groups: int, min_ci_groups: int,
    level: float = CI_LEVEL,
) -> Interval:  # fmt: skip
    """point +- t_(n-1) * jackknife SE over the n contributing clusters (`jackknife`: the
    figure with each of them left out)."""
    why = _usable(n_groups, min_ci_groups, point)
    if why:
        return no_interval(why, n_groups)
    var, undefined = jackknife_variance(jackknife)
    if not np.isfinite(var):
        return Interval(None, None, "undefined when a cluster is left out", n_groups, undefined)
    half = float(scipy_stats.t.ppf(0.5 + level / 2, n_groups - 1)) * np.sqrt(var)
    return Interval(float(point - half), float(point + half), None, n_groups, undefined)  # type: ignore[operator]


def wilson_ci(
    point: float | None, jackknife: np.ndarray, n_units: int, n_groups: int, min_ci_groups: int,
    level: float = CI_LEVEL,
) -> Interval:  # fmt: skip
    """Wilson's score interval for a share p of `n_units` units drawn in `n_groups` clusters,
    at the effective size p(1 - p) / v (v: jackknife variance over clusters), at most
    `n_units` and all of them when v = 0 (module docstring)."""
    why = _usable(n_groups, min_ci_groups, point)
    if why:
        return no_interval(why, n_groups)
    var, undefined = jackknife_variance(jackknife)
    p = min(max(float(point), 0.0), 1.0)  # type: ignore[arg-type]
    n_eff = float(n_units)
    if np.isfinite(var) and var > 0:
        n_eff = min(n_eff, p * (1 - p) / var)
    if n_eff <= 0:  # p at 0 or 1 with v > 0 cannot happen; a share of no unit has no CI
        return Interval(None, None, "no unit behind the share", n_groups, undefined)
    z = float(scipy_stats.norm.ppf(0.5 + level / 2))
    centre = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z * np.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff**2)) / (1 + z * z / n_eff)
    return Interval(
        float(max(centre - half, 0.0)), float(min(centre + half, 1.0)), None, n_groups, undefined
    )


def bootstrap_t_ci(
    num: np.ndarray, den: np.ndarray, weights: np.ndarray | None, min_ci_groups: int,
    level: float = CI_LEVEL,
) -> Interval:  # fmt: skip
    """Studentized cluster bootstrap of the ratio R = sum num / sum den over the clusters
    with den > 0 (`weights`: (B, clusters) resample counts). Each resample's
    t_b = (R_b - R) / SE_b, SE from the ratio's delta-method terms (power.linearised). A
    resample whose clusters all give one value has no SE of its own: it is studentized by the
    sample's SE instead (an infinite t would push an end of the interval to the figure's
    bound whenever many tasks share one value, e.g. a judge that gives many groups no
    signal). The interval is [R - t_(1-a/2) SE, R - t_(a/2) SE]. Every task giving the same
    value leaves no spread to draw an interval from: no CI, with that reason."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    used = den > 0
    n = int(used.sum())
    why = too_few_groups(n, min_ci_groups)
    if why:
        return no_interval(why, n)
    if weights is None or not weights.shape[0]:
        return no_interval(NO_BOOTSTRAP, n)
    r = float(num.sum() / den.sum())
    se = float(_ratio_se(num[None, :], den[None, :], np.ones((1, num.size)), used)[1][0])
    if flat_se(se, r):
        return no_interval(f"all {n} groups give the same value: no spread for a CI", n)
    r_b, se_b = _ratio_se(num[None, :], den[None, :], weights, used)
    return studentized(r, se, r_b, se_b, n, level)


def flat_se(se: float, r: float) -> bool:
    """Whether an SE is floating-point noise around 0 beside the figure `r`."""
    return not se > _FLAT * max(1.0, abs(r))


def studentized(
    r: float, se: float, r_b: np.ndarray, se_b: np.ndarray, n: int, level: float = CI_LEVEL
) -> Interval:
    """The studentized bootstrap's interval [R - t_(1-a/2) SE, R - t_(a/2) SE] from the
    figure `r`, its SE and each resample's (r_b, se_b) (NaN r_b: undefined, counted); a
    resample without an SE of its own is studentized by `se` (`bootstrap_t_ci`)."""
    defined = ~np.isnan(r_b)
    undefined = int((~defined).sum())
    resamples = r_b.size
    r_b, se_b = r_b[defined], se_b[defined]
    if not r_b.size:
        return Interval(None, None, f"undefined in every one of {resamples} resamples",
                        n, undefined)  # fmt: skip
    se_b = np.where(se_b > _FLAT * max(1.0, abs(r)), se_b, se)
    t_b = (r_b - r) / se_b
    alpha = round((1.0 - level) / 2.0, 12)  # 0.025, not 0.025000000000000022: the rank
    lo_t, hi_t = np.quantile(t_b, [alpha, 1.0 - alpha], method="inverted_cdf")
    return Interval(float(r - hi_t * se), float(r - lo_t * se), None, n, undefined)


def _ratio_se(
    num: np.ndarray, den: np.ndarray, w: np.ndarray, used: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per weight row: R_w and its delta-method SE sqrt(sum w e^2 / (n (n - 1))), e the
    clusters' linearised terms (num - R_w den) / mean den, n the resampled clusters. The
    squares are summed term by term (not expanded), so clusters that all agree give 0."""
    c, m = num[0], den[0]
    n_w = w @ used.astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        r_w = (w @ c) / (w @ m)
        resid = c[None, :] - r_w[:, None] * m[None, :]
        ss = np.sum(w * resid * resid, axis=1)
        mean_den = (w @ m) / n_w
        se = np.sqrt(ss / (mean_den**2 * n_w * (n_w - 1)))
    return r_w, se


def cluster_ci(
    point: float | None,
    jackknife: np.ndarray,
    n_groups: int,
    min_ci_groups: int,
    *,
    units: int | None = None,
    ratio: tuple[np.ndarray, np.ndarray] | None = None,
    weights: np.ndarray | None = None,
    bounds: tuple[float, float] = (-np.inf, np.inf),
) -> Interval:
    """A figure's CI by its kind (module docstring): a share of `units` units -> Wilson at the
    effective size; a ratio of per-cluster sums (`ratio` = (num, den) per cluster, resampled
    with `weights`) -> the studentized bootstrap, its ends clipped to the figure's `bounds`;
    else the jackknife t interval."""
    if units is not None:
        return wilson_ci(point, jackknife, units, n_groups, min_ci_groups)
    if ratio is not None:
        if _usable(n_groups, min_ci_groups, point):
            return no_interval(_usable(n_groups, min_ci_groups, point) or "", n_groups)
        ci = bootstrap_t_ci(*ratio, weights, min_ci_groups)
        if not ci.valid:
            return ci
        low, high = max(ci.low, bounds[0]), min(ci.high, bounds[1])  # type: ignore[type-var]
        return Interval(float(low), float(high), None, ci.n_groups, ci.undefined_resamples)
    return t_ci(point, jackknife, n_groups, min_ci_groups)


def reason_key(reason: str | None) -> str:
    """The category of an unscored row's reason: the text before the first ':' as a slug
    (lowercase, runs of other characters -> '_'), safe as a DVC/MLflow metric name part."""
    head = (reason or "").split(":", 1)[0].strip().lower()
    slug = re.sub(r"[^a-z0-9]+", "_", head).strip("_")
    return (slug or "unspecified")[:REASON_MAX_CHARS]


def describe(values: np.ndarray | list[float]) -> dict[str, float | int | None]:
    """n, mean, median, sample std (ddof=1), q1, q3, iqr, min, max of finite values.

    Empty input gives n=0 and None elsewhere; a single value gives std None (ddof=1 undefined).
    """
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)]
    out: dict[str, float | int | None] = {"n": int(arr.size)}
    if arr.size == 0:
        out.update(dict.fromkeys(DISTRIBUTION_KEYS))
        return out
    q1, median, q3 = np.percentile(arr, [25.0, 50.0, 75.0])
    out.update(
        mean=float(arr.mean()),
        median=float(median),
        std=float(arr.std(ddof=1)) if arr.size > 1 else None,
        q1=float(q1),
        q3=float(q3),
        iqr=float(q3 - q1),
        min=float(arr.min()),
        max=float(arr.max()),
    )
    return out


def _first(frame: pl.DataFrame, column: str) -> Any:
    values = frame.get_column(column).drop_nulls().unique().sort()
    if values.len() > 1:
        logger.warning(
            "column %s has several values for one evaluator: %s", column, values.to_list()
        )
    return values[0] if values.len() else None


def stats_for_evaluator(rows: pl.DataFrame) -> dict[str, Any]:
    """Statistics of one evaluator's rows (all rows must share the evaluator)."""
    n_rows = rows.height
    scored = rows.filter(pl.col("status") == "scored")
    unscored = rows.filter(pl.col("status") != "scored")
    dist = describe(scored.get_column("score").drop_nulls().to_numpy())
    n_out = int(rows.get_column("out_of_range").fill_null(False).sum()) if n_rows else 0

    counts: dict[str, int] = {}
    for reason in unscored.get_column("reason").to_list():
        key = reason_key(reason)
        counts[key] = counts.get(key, 0) + 1
    by_reason = {key: {"n": n, "share": n / unscored.height} for key, n in sorted(counts.items())}

    failed = unscored.filter(
        pl.col("reason").fill_null("").str.starts_with(JUDGE_CALL_FAILED)
        | pl.col("reason").fill_null("").str.starts_with(JUDGE_REPLY_ERROR)
    ).height

    raw = rows.get_column("raw_score").drop_nulls().to_numpy().astype(float)
    raw = raw[np.isfinite(raw)]
    result: dict[str, Any] = {
        "protocol": _first(rows, "protocol") if n_rows else None,
        "judge": _first(rows, "judge") if n_rows else None,
        "n_rows": n_rows,
        "n_scored": scored.height,
        "n_unscored": unscored.height,
        "n_candidates": rows.get_column("candidate_id").n_unique() if n_rows else 0,
        "n_repeats": rows.get_column("repeat").n_unique() if n_rows else 0,
        "unscored_rate": unscored.height / n_rows if n_rows else None,
        "n_judge_failures": failed,
        "judge_failure_rate": failed / n_rows if n_rows else None,
        "n_out_of_range": n_out,
        "out_of_range_rate": n_out / n_rows if n_rows else None,
        "unscored_by_reason": by_reason,
        "raw_score_min": float(raw.min()) if raw.size else None,
        "raw_score_max": float(raw.max()) if raw.size else None,
        "reason": None,
    }
    result.update({k: v for k, v in dist.items() if k != "n"})
    result.update(group_signal(rows))
    if n_rows == 0:
        result["reason"] = "no rows for this evaluator"
    elif scored.height == 0:
        result["reason"] = "no scored rows: every row is unscored"
    return result


def group_signal(rows: pl.DataFrame) -> dict[str, Any]:
    """What a GRPO reward lives on: whether scores differ inside a group. Over the groups
    (task, repeat) with at least 2 scored candidates: `zero_advantage_rate`, the share in
    which every candidate got the same score (GRPO's advantage is 0 for all: no learning
    signal), and `within_group_std`, the mean over groups of the scores' sample std (ddof=1,
    as `describe`). `n_signal_groups` is their n, `n_zero_advantage_groups` the flat ones."""
    scored = rows.filter((pl.col("status") == "scored") & pl.col("score").is_not_null())
    groups = (
        scored.group_by("task_id", "repeat")
        .agg(pl.col("score").alias("scores"))
        .filter(pl.col("scores").list.len() >= 2)
    )
    spreads = [np.asarray(g, dtype=float) for g in groups.get_column("scores").to_list()]
    n = len(spreads)
    flat = sum(float(s.max() - s.min()) <= 1e-9 for s in spreads)
    return {
        "n_signal_groups": n,
        "n_zero_advantage_groups": flat,
        "zero_advantage_rate": flat / n if n else None,
        "within_group_std": float(np.mean([s.std(ddof=1) for s in spreads])) if n else None,
    }


def evaluator_stats(scores: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """`stats_for_evaluator` for every evaluator in the scores table, keyed by name."""
    names = sorted(scores.get_column("evaluator").unique().to_list()) if scores.height else []
    return {name: stats_for_evaluator(scores.filter(pl.col("evaluator") == name)) for name in names}


def latency_summary(scores: pl.DataFrame) -> dict[str, dict[str, float | int | None]]:
    """Mean, median and total latency (seconds) per evaluator. For the report only:
    timings vary between identical runs, so they never go into metrics.json."""
    out: dict[str, dict[str, float | int | None]] = {}
    if not scores.height:
        return out
    for name in sorted(scores.get_column("evaluator").unique().to_list()):
        lat = scores.filter(pl.col("evaluator") == name).get_column("latency_s").to_numpy()
        lat = lat.astype(float)[np.isfinite(lat.astype(float))]
        out[name] = {
            "n": int(lat.size),
            "mean_latency_s": float(lat.mean()) if lat.size else None,
            "median_latency_s": float(np.median(lat)) if lat.size else None,
            "total_latency_s": float(lat.sum()) if lat.size else None,
        }
    return out


DIGITS = 6


def clean_json(obj: Any, digits: int = DIGITS, significant: bool = False) -> Any:
    """Round floats (to `digits` decimals, or `significant` digits for figures far below 1,
    such as a training effect), turn NaN/inf into None and sort dict keys, recursively."""
    if isinstance(obj, dict):
        return {str(k): clean_json(obj[k], digits, significant) for k in sorted(obj, key=str)}
    if isinstance(obj, list | tuple):
        return [clean_json(v, digits, significant) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float) or hasattr(obj, "__float__"):
        x = float(obj)
        if not math.isfinite(x):
            return None
        if significant:
            return float(f"{x:.{digits}g}") + 0.0
        return round(x, digits) + 0.0  # + 0.0 turns -0.0 into 0.0
    return obj
