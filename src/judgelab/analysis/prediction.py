"""Does the audit predict training? Each arm's audit figures against its training effect
(`training.study`, `training.effect`), over arms and seeds.

Contract:
- `arm_audit(rewards, ...)`: each arm's audit figures (`fidelity.truth_metrics`, the analysis's
  own code and CIs) from the study's reward table: one row per (arm, seed, task, candidate)
  with the arm's reward (null: unscored) and the tests' verdict (null: untested). Where the
  seeds share their groups (the first-order study on a table's groups: every seed trains on
  the same candidates with the same rewards) a task is one group, counted once; where they
  drew different groups a (seed, task) pair is one group. Either way a task is ONE cluster of
  every CI (its seeds' groups are resampled together: `cluster_weights`); the Wilson and
  jackknife intervals of shares count groups, so with different draws per seed they are
  read with that caveat (the primary's studentized bootstrap resamples the clusters).
- `predict(audit, effects, ...)`: for one audit figure, the arms that have it and an effect:
  * `spearman`: the rank correlation (average ranks for ties) of the arms' figure with their
    mean effect over seeds;
  * `slope`, `intercept`: the ordinary least-squares line effect = intercept + slope ·
    figure over every (arm, seed) point;
  * 95 % percentile CIs for both from a two-level bootstrap: arms resampled with replacement,
    and each drawn arm's seeds resampled with replacement, so the seed-to-seed spread is in
    the interval; where every effect row carries its effect on each bank task alone
    (`bank_effects`, a first-order study that kept them) each resample also draws the bank
    tasks (`analysis.crossed`), so the bank's choice is in it too (`bank_tasks_resampled`).
    The figure of an arm is held at its value (its own CI is reported beside it,
    not propagated). A resample where the figure takes a single value leaves both undefined;
    it is counted (`undefined_resamples`), not dropped in silence;
  * no CI from fewer arms than `min_arms` (`reason` says so), and no figure from fewer than 3.
- `pooled_effects(terms, ...)`: each arm's first-order effect over every task with its CI,
  the training tasks resampled and, where the terms carry N per bank task, the bank tasks
  crossed with them (`analysis.crossed`); `first_order_check` and `judges_vs_planted` draw
  their CIs on the same resamples (`_effect_draws`). The audit figures' draws
  (`arm_figure_draws`) depend on the training tasks only and take the same task draws.
- Pure functions over lists and polars frames; nothing here reads files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.crossed import bank_resample_weights, crossed_ratios, crossed_t_ci
from judgelab.analysis.fidelity import figure_draws, truth_metrics
from judgelab.analysis.stats import (
    CI_LEVEL,
    CIRule,
    bootstrap_t_ci,
    percentile_ci,
    resample_weights,
)
from judgelab.analysis.truth import Truth

MIN_ARMS = 3  # a rank correlation or a line over fewer arms is not a figure
MIN_SEEDS_CI = 3  # an arm's effect gets a t interval over its seeds from this many up


def seed_interval(effects: Sequence[float]) -> tuple[float | None, float | None]:
    """An arm's 95 % t interval over its seeds' effects (mean ± t · sd / √n, sd with ddof
    1); none from fewer than MIN_SEEDS_CI seeds. The seeds are the units: the bank is the
    same for every seed, so the interval is the seed-to-seed spread, not the bank's."""
    from scipy import stats as scipy_stats

    if len(effects) < MIN_SEEDS_CI:
        return None, None
    x = np.asarray(effects, dtype=float)
    half = scipy_stats.t.ppf(0.5 + CI_LEVEL / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    return float(x.mean() - half), float(x.mean() + half)


def ranks(x: Sequence[float]) -> np.ndarray:
    """Ranks 1..n, ties given the mean of the ranks they span."""
    a = np.asarray(x, dtype=float)
    order = np.argsort(a, kind="mergesort")
    out = np.empty(a.size)
    sorted_a = a[order]
    i = 0
    while i < a.size:
        j = i
        while j + 1 < a.size and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        out[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return out


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    xc, yc = x - x.mean(), y - y.mean()
    den = np.sqrt((xc * xc).sum() * (yc * yc).sum())
    return float((xc * yc).sum() / den) if den > 0 else float("nan")


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's ρ: Pearson's correlation of the ranks (NaN when either is constant)."""
    return _pearson(ranks(x), ranks(y))


def ols(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line y = intercept + slope · x (NaN slope when
    x is constant)."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    xc = xa - xa.mean()
    sxx = float((xc * xc).sum())
    if sxx <= 0:
        return float("nan"), float("nan")
    slope = float((xc * (ya - ya.mean())).sum() / sxx)
    return slope, float(ya.mean() - slope * xa.mean())


def _points(
    arms: Sequence[str], audit: Mapping[str, float], effects: Mapping[str, list[float]]
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Per arm (figure, mean effect), and per (arm, seed) point (figure, effect)."""
    fx = [audit[a] for a in arms]
    my = [float(np.mean(effects[a])) for a in arms]
    px = [audit[a] for a in arms for _ in effects[a]]
    py = [e for a in arms for e in effects[a]]
    return fx, my, px, py


def _percentile(draws: list[float], level: float) -> tuple[float | None, float | None, int]:
    finite = np.array([d for d in draws if np.isfinite(d)])
    undefined = len(draws) - finite.size
    if finite.size == 0:
        return None, None, undefined
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high), undefined


def _bootstrap(
    arms: Sequence[str],
    values: Mapping[str, float],
    by_arm: Mapping[str, list[float]],
    n_boot: int,
    seed: int,
    by_bank: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """The two-level bootstrap's percentile CIs of ρ and the slope (module docstring); with
    `by_bank` (arm -> (seeds, bank tasks) effects on each bank task alone, whose mean is the
    seed's effect) each resample also draws the bank tasks, on a stream of its own (so that
    the arms' and seeds' draws are those without it), the same draw for every arm and seed."""
    rng = np.random.default_rng(seed)
    n_banks = next(iter(by_bank.values())).shape[1] if by_bank else 0
    banks = bank_resample_weights(n_banks, n_boot, seed) if by_bank else None
    rhos, slopes = [], []
    for b in range(n_boot):
        picked = [arms[i] for i in rng.integers(0, len(arms), len(arms))]
        fx_b, my_b, px_b, py_b = [], [], [], []
        for a in picked:
            own = by_arm[a]
            if banks is not None and by_bank is not None:  # each seed's effect on this bank
                own = (by_bank[a] @ banks[b] / n_banks).tolist()
            draws = [own[i] for i in rng.integers(0, len(own), len(own))]
            fx_b.append(values[a])
            my_b.append(float(np.mean(draws)))
            px_b += [values[a]] * len(draws)
            py_b += draws
        rhos.append(spearman(fx_b, my_b))
        slopes.append(ols(px_b, py_b)[0])
    r_low, r_high, undefined = _percentile(rhos, CI_LEVEL)
    s_low, s_high, _ = _percentile(slopes, CI_LEVEL)
    out = {
        "spearman_ci_low": r_low,
        "spearman_ci_high": r_high,
        "slope_ci_low": s_low,
        "slope_ci_high": s_high,
        "undefined_resamples": undefined,
    }
    return out | ({"bank_tasks_resampled": n_banks} if by_bank else {})


def _bank_effects(
    effects: Sequence[Mapping[str, Any]], by_arm: Mapping[str, list[float]]
) -> dict[str, np.ndarray] | None:
    """Per arm of `by_arm`, its rows' effects on each bank task alone ((seeds, bank tasks),
    in `by_arm`'s order), where every such row has the same `bank_effects`; else None (the
    bank is then held fixed)."""
    rows: dict[str, list[Mapping[str, float]]] = {}
    for row in effects:
        if row["arm"] in by_arm and row["effect"] is not None:
            rows.setdefault(row["arm"], []).append(row.get("bank_effects") or {})
    keys = {tuple(sorted(r)) for rs in rows.values() for r in rs}
    if len(keys) != 1 or not next(iter(keys)):
        return None
    banks = next(iter(keys))
    return {a: np.array([[float(r[b]) for b in banks] for r in rs]) for a, rs in rows.items()}


def predict(
    figure: str,
    audit: Mapping[str, float | None],
    effects: Sequence[Mapping[str, Any]],
    min_arms: int,
    n_boot: int,
    seed: int,
) -> dict[str, Any]:
    """How well `audit` (arm -> the figure's value) predicts the training effect (`effects`:
    rows with arm, seed, effect, and, from a first-order study that kept them, the effect
    on each bank task alone, `bank_effects`, for the bank's draws); module docstring."""
    by_arm: dict[str, list[float]] = {}
    for row in effects:
        if row["effect"] is not None and audit.get(row["arm"]) is not None:
            by_arm.setdefault(row["arm"], []).append(float(row["effect"]))
    arms = sorted(by_arm)
    values = {a: float(audit[a]) for a in arms}  # type: ignore[arg-type]
    n_seeds = sorted({len(v) for v in by_arm.values()})
    out: dict[str, Any] = {
        "figure": figure, "n_arms": len(arms), "n_points": sum(len(v) for v in by_arm.values()),
        "seeds_per_arm": n_seeds, "spearman": None, "slope": None, "intercept": None,
        "spearman_ci_low": None, "spearman_ci_high": None, "slope_ci_low": None,
        "slope_ci_high": None, "undefined_resamples": None, "ci_level": CI_LEVEL,
        "min_arms": min_arms, "n_bootstrap": n_boot, "reason": None,
        "arms": [{"arm": a, "audit": values[a], "effect_mean": float(np.mean(by_arm[a])),
                  "effect_sd": float(np.std(by_arm[a], ddof=1)) if len(by_arm[a]) > 1 else None,
                  "effect_ci": seed_interval(by_arm[a]), "n_seeds": len(by_arm[a])}
                 for a in arms],
    }  # fmt: skip
    if len(arms) < MIN_ARMS:
        out["reason"] = f"n = {len(arms)} arms: too few for a rank correlation (minimum 3)"
        return out
    fx, my, px, py = _points(arms, values, by_arm)
    rho, (slope, intercept) = spearman(fx, my), ols(px, py)
    out |= {"spearman": None if np.isnan(rho) else rho,
            "slope": None if np.isnan(slope) else slope,
            "intercept": None if np.isnan(intercept) else intercept}  # fmt: skip
    if out["spearman"] is None:
        out["reason"] = "the figure or the mean effect is the same for every arm"
        return out
    if len(arms) < min_arms:
        out["reason"] = f"n = {len(arms)} arms: too few for a CI (minimum {min_arms})"
        return out
    if n_boot == 0:
        out["reason"] = "bootstrap disabled (bootstrap = 0)"
        return out
    return out | _bootstrap(arms, values, by_arm, n_boot, seed, _bank_effects(effects, by_arm))


REWARD_COLUMNS = {
    "arm": pl.String,
    "seed": pl.Int64,
    "task_id": pl.String,
    "candidate_id": pl.String,
    "reward": pl.Float64,
    "passed": pl.Boolean,
}


def reward_frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """The study's reward rows (`training.study.StudyResult.rewards`) as a table."""
    return pl.DataFrame(list(rows), schema=REWARD_COLUMNS)


def shared_groups(rows: pl.DataFrame) -> bool:
    """Whether every seed of one arm's rows trained on the same groups with the same rewards
    and verdicts (a first-order study on a table's groups: `training.draws`): then each
    task's groups are copies, one group and one cluster, never one per seed."""
    seeds = rows.get_column("seed").unique().to_list()
    if len(seeds) < 2:
        return True
    key = ["task_id", "candidate_id", "reward", "passed"]
    first = rows.filter(pl.col("seed") == min(seeds)).select(key).sort(key, nulls_last=True)
    return all(
        rows.filter(pl.col("seed") == s).select(key).sort(key, nulls_last=True).equals(first)
        for s in seeds
    )


def _arm_tables(rewards: pl.DataFrame) -> dict[str, tuple[pl.DataFrame, Truth, list[str]]]:
    """Each arm's scores and truth as the analysis takes them, and each group's cluster (its
    task). Where the seeds share their groups (`shared_groups`) a task is one group (named by
    the task); else a (seed, task) pair is one group (``seed|task``), and a task's groups
    are one cluster of every resample (`cluster_weights`)."""
    out: dict[str, tuple[pl.DataFrame, Truth, list[str]]] = {}
    for arm in sorted(rewards.get_column("arm").unique().to_list()):
        rows = rewards.filter(pl.col("arm") == arm)
        if shared_groups(rows):
            rows = rows.filter(pl.col("seed") == rows.get_column("seed").min())
            rows = rows.with_columns(pl.col("task_id").alias("group"))
        else:
            rows = rows.with_columns(
                (pl.col("seed").cast(pl.String) + "|" + pl.col("task_id")).alias("group")
            )
        table = rows.select(
            pl.col("group").alias("task_id"), "candidate_id", pl.col("passed").cast(pl.Boolean),
            pl.lit(None, dtype=pl.String).alias("outcome"),
        ).sort("task_id", "candidate_id")  # fmt: skip
        known = table.filter(pl.col("passed").is_not_null())
        tasks = sorted(known.get_column("task_id").unique().to_list())
        truth = Truth("tests", table, tasks, None if tasks else "no candidate was tested")
        cand = rows.select(
            pl.col("group").alias("task_id"), "candidate_id",
            pl.col("reward").cast(pl.Float64).alias("score"),
        ).sort("task_id", "candidate_id")  # fmt: skip
        task_of = dict(rows.select("group", "task_id").unique().iter_rows())
        out[arm] = (cand, truth, [task_of[g] for g in tasks])
    return out


def cluster_weights(clusters: Sequence[str], n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, groups) resample counts in which the groups of one cluster (a task) are
    drawn together: `resample_weights` over the sorted clusters, one column per group."""
    units = sorted(set(clusters))
    index = {u: i for i, u in enumerate(units)}
    return resample_weights(len(units), n_boot, seed)[:, [index[c] for c in clusters]]


def arm_audit(
    rewards: pl.DataFrame, rule: CIRule, praise_threshold: float = 0.8
) -> dict[str, dict[str, Any]]:
    """Each arm's truth metrics on the study's groups (module docstring), a task one cluster
    of every bootstrap resample whatever its number of seeds."""
    out: dict[str, dict[str, Any]] = {}
    for arm, (cand, truth, clusters) in _arm_tables(rewards).items():
        weights = cluster_weights(clusters, rule.n_boot, rule.seed)
        out[arm] = truth_metrics(cand, truth, praise_threshold, weights, rule)
    return out


def arm_figure_draws(
    rewards: pl.DataFrame,
    units: Sequence[str],
    rule: CIRule,
    figure: str,
    praise_threshold: float = 0.8,
) -> dict[str, np.ndarray]:
    """Each arm's audit `figure` on every task resample of `pooled_effects` (`units`: its
    tasks, `effect_units`; the same draws), a task's groups (one per seed) weighted as the
    task: the figure's own spread over tasks, paired with the effects'."""
    weights = resample_weights(len(units), rule.n_boot, rule.seed)
    index = {u: i for i, u in enumerate(units)}
    out: dict[str, np.ndarray] = {}
    for arm, (cand, truth, tasks) in _arm_tables(rewards).items():
        missing = sorted(set(tasks) - set(index))
        if missing:
            raise ValueError(f"arm {arm!r}: rewards for tasks with no effect terms: {missing}")
        columns = [index[t] for t in tasks]
        out[arm] = figure_draws(cand, truth, praise_threshold, figure, weights[:, columns])
    return out


PREDICTORS = (
    "signal_fidelity",
    "pairwise_accuracy_strict",
    "advantage_fidelity",
    "top1_over_chance",
    "right_pair_rate",
    "inverted_pair_rate",
)


def predictions(
    audits: Mapping[str, Mapping[str, Any]],
    effects: Sequence[Mapping[str, Any]],
    min_arms: int,
    n_boot: int,
    seed: int,
    figures: Sequence[str] = PREDICTORS,
) -> list[dict[str, Any]]:
    """`predict` for each audit figure (the primary first), over the same arms and seeds."""
    return [
        predict(f, {a: m.get(f) for a, m in audits.items()}, effects, min_arms, n_boot, seed)
        for f in figures
    ]


def effect_check(
    effects: Sequence[Mapping[str, Any]], flips: Mapping[str, float], placebo: str | None
) -> dict[str, Any]:
    """The effect measure's own check (docs/TRAINING.md): the planted arms' effect must fall
    as their flip rate rises and the placebo's sit at 0. `flips`: planted arm -> flip rate;
    `placebo`: the placebo arm's name (None: no placebo).

    - `spearman`: the rank correlation of the flip rates with the planted arms' mean effects
      (None below 3 rates); `seeds_falling` / `n_seeds`: the seeds in which the planted
      arms' effects alone correlate negatively with the rate;
    - `placebo_mean`, `placebo_ci` (t over seeds, none below 3), `placebo_covers_zero`;
    - `holds`: ρ < 0, and the placebo's CI covers 0 where it has one (None: cannot tell).
    """
    by_arm: dict[str, dict[int, float]] = {}
    for row in effects:
        if row["effect"] is not None:
            by_arm.setdefault(row["arm"], {})[int(row["seed"])] = float(row["effect"])
    planted = sorted((f, a) for a, f in flips.items() if a in by_arm)
    rates = [f for f, _ in planted]
    means = [float(np.mean(list(by_arm[a].values()))) for _, a in planted]
    rho = spearman(rates, means) if len(planted) >= MIN_ARMS else None
    seeds = sorted({s for _, a in planted for s in by_arm[a]})
    falling = 0
    for s in seeds:
        here = [(f, by_arm[a][s]) for f, a in planted if s in by_arm[a]]
        if len(here) >= MIN_ARMS and spearman([f for f, _ in here], [e for _, e in here]) < 0:
            falling += 1
    out: dict[str, Any] = {
        "flips": rates, "planted_means": means,
        "spearman": None if rho is None or np.isnan(rho) else rho,
        "seeds_falling": falling, "n_seeds": len(seeds), "placebo": placebo,
        "placebo_mean": None, "placebo_ci": [None, None], "placebo_seeds": 0,
        "placebo_covers_zero": None,
    }  # fmt: skip
    if placebo is not None and placebo in by_arm:
        values = list(by_arm[placebo].values())
        low, high = seed_interval(values)
        out |= {"placebo_mean": float(np.mean(values)), "placebo_ci": [low, high],
                "placebo_seeds": len(values),
                "placebo_covers_zero": None if low is None else bool(low <= 0 <= high)}  # fmt: skip
    if out["spearman"] is None:
        out["holds"] = None
    else:
        out["holds"] = out["spearman"] < 0 and out["placebo_covers_zero"] is not False
    return out


def pooled_effects(
    terms: Sequence[Mapping[str, Any]], learning_rate: float, rule: CIRule
) -> dict[str, dict[str, Any]]:
    """Each arm's first-order effect over every (seed, task) of the study
    (`training.first_order`: η ΣN / ΣD) with the studentized cluster-bootstrap CI of a ratio
    of per-task sums. The tasks are the clusters (a task's terms summed over the seeds that
    trained on it), resampled with the same draws for every arm (paired); only tasks the arm
    steps on (D > 0) count towards `rule.min_ci_groups`. Where the terms carry N per bank task
    (`n_bank`, `effect_banks`) the bank tasks are resampled too, crossed with the tasks
    (`analysis.crossed`: the bank's choice is in the CI, `bank_tasks_resampled` says over
    how many); else the bank is held fixed (`stats.bootstrap_t_ci`). An arm that steps on no
    group has effect 0 (no step moves nothing) and no CI. Beside it, each seed's own effect
    and their SD (the adapters' spread, `seed_sd`: None below 2 seeds)."""
    units, banks = effect_units(terms), effect_banks(terms)
    index = {u: i for i, u in enumerate(units)}
    weights = resample_weights(len(units), rule.n_boot, rule.seed)
    bank_draws = bank_resample_weights(len(banks or []), rule.n_boot, rule.seed)
    out: dict[str, dict[str, Any]] = {}
    for arm in sorted({str(r["arm"]) for r in terms}):
        num, den = np.zeros(len(units)), np.zeros(len(units))
        per_bank = np.zeros((len(units), len(banks or [])))
        seeds: dict[int, list[float]] = {}
        for r in terms:
            if r["arm"] == arm:
                i = index[str(r["task_id"])]
                num[i] += learning_rate * float(r["n"])
                den[i] += float(r["d"])
                for j, b in enumerate(banks or []):
                    per_bank[i, j] += learning_rate * float(r["n_bank"][b])
                part = seeds.setdefault(int(r["seed"]), [0.0, 0.0])
                part[0] += learning_rate * float(r["n"])
                part[1] += float(r["d"])
        value = float(num.sum() / den.sum()) if den.sum() > 0 else 0.0
        per_seed = {s: (n / d if d > 0 else 0.0) for s, (n, d) in sorted(seeds.items())}
        if banks:
            ci = crossed_t_ci(per_bank, den, weights, bank_draws, rule.min_ci_groups)
        else:
            ci = bootstrap_t_ci(num, den, weights, rule.min_ci_groups)
        out[arm] = {"effect": value, "ci_low": ci.low, "ci_high": ci.high,
                    "ci_reason": ci.reason, "groups": len(units),
                    "stepped_groups": int((den > 0).sum()),
                    "seed_effects": [per_seed[s] for s in per_seed], "seeds": list(per_seed),
                    "seed_sd": float(np.std(list(per_seed.values()), ddof=1))
                    if len(per_seed) > 1 else None,
                    "num": num.tolist(), "den": den.tolist()}  # fmt: skip
        if banks:
            out[arm] |= {"bank_tasks_resampled": len(banks), "num_bank": per_bank.tolist()}
    return out


UNSAVED = ("num", "den", "num_bank")  # `pooled_effects`' working arrays, not for the files


def effect_units(terms: Sequence[Mapping[str, Any]]) -> list[str]:
    """The clusters `pooled_effects` resamples: the study's task ids, sorted."""
    return sorted({str(r["task_id"]) for r in terms})


def effect_banks(terms: Sequence[Mapping[str, Any]]) -> list[str] | None:
    """The bank tasks `pooled_effects` resamples (sorted): those of every term's `n_bank`
    (N per contrast bank task, `training.study`); None where the terms have none (a study
    written before they were kept: its bank is held fixed) or no bank task. Terms that
    disagree on the bank tasks are an error naming the first that differs."""
    if not terms or "n_bank" not in terms[0]:
        if any("n_bank" in r for r in terms):
            raise ValueError("study terms: some rows have n_bank and some do not")
        return None
    banks = sorted(terms[0]["n_bank"])
    for r in terms:
        if sorted(r.get("n_bank") or {}) != banks:
            raise ValueError(
                f"study terms: arm {r['arm']!r}, seed {r['seed']}, task {r['task_id']!r} has "
                f"bank tasks {sorted(r.get('n_bank') or {})}, not {banks}"
            )
    return banks or None


def _effect_draws(
    pooled: Mapping[str, Mapping[str, Any]], arms: Sequence[str], rule: CIRule
) -> tuple[np.ndarray, int]:
    """(resamples, arms) of each arm's pooled effect over the resamples of `pooled_effects`
    (the same draws for every arm: paired; the bank tasks drawn too where they are
    resampled, `analysis.crossed`), and the number of tasks."""
    num = np.array([pooled[a]["num"] for a in arms])
    den = np.array([pooled[a]["den"] for a in arms])
    n_units = num.shape[1]
    weights = resample_weights(n_units, rule.n_boot, rule.seed)
    if all("num_bank" in pooled[a] for a in arms):
        per_bank = [np.asarray(pooled[a]["num_bank"], dtype=float) for a in arms]
        v = bank_resample_weights(per_bank[0].shape[1], rule.n_boot, rule.seed)
        draws = np.column_stack([crossed_ratios(nb, d, weights, v)
                                 for nb, d in zip(per_bank, den, strict=True)])  # fmt: skip
        return np.where(np.isfinite(draws), draws, 0.0), n_units
    with np.errstate(divide="ignore", invalid="ignore"):
        wn, wd = weights @ num.T, weights @ den.T
        return np.where(wd > 0, wn / np.where(wd > 0, wd, 1.0), 0.0), n_units


def _banks_drawn(pooled: Mapping[str, Mapping[str, Any]], arms: Sequence[str]) -> dict[str, int]:
    """`bank_tasks_resampled` where `_effect_draws` draws the bank tasks for `arms` (nothing
    where the bank is held fixed, so a whole-bank study's figures keep their shape)."""
    if arms and all("num_bank" in pooled[a] for a in arms):
        return {"bank_tasks_resampled": int(pooled[arms[0]]["bank_tasks_resampled"])}
    return {}


def _lines(y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The least-squares line y = intercept + slope · x of each row of `y` (resamples, points):
    (slopes, intercepts), as `ols` computes one. `x`: the points' x, one row for every
    resample or a row per resample; NaN where a row's x are all equal or undefined."""
    if x.ndim == 1:
        xc = x - x.mean()
        slopes = (y - y.mean(axis=1, keepdims=True)) @ xc / float(xc @ xc)
        return slopes, y.mean(axis=1) - slopes * x.mean()
    xc = x - x.mean(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        slopes = ((y - y.mean(axis=1, keepdims=True)) * xc).sum(axis=1) / (xc * xc).sum(axis=1)
    slopes = np.where(np.isfinite(slopes), slopes, np.nan)
    return slopes, y.mean(axis=1) - slopes * x.mean(axis=1)


def first_order_check(
    pooled: Mapping[str, Mapping[str, Any]],
    flips: Mapping[str, float],
    placebo: str | None,
    rule: CIRule,
) -> dict[str, Any]:
    """The effect measure's own check for the first-order study (docs/TRAINING.md):
    - `slope` of the planted arms' effect on their flip rate (least squares), with a 95 %
      percentile CI over the same task resamples as `pooled_effects` (paired: every planted
      arm's effect recomputed on each resample); it must lie wholly below 0;
    - the placebo's CI must cover 0; and `tests_detected`: the unflipped tests' arm (flip 0)
      has a CI wholly above 0, i.e. the study is large enough to see the tests' direction.
    Where the bank is resampled, `tests_bank`: on how many bank tasks the tests' arm raises
    passing against failing code and on how many it lowers it (its effect per bank task,
    pooled over tasks and seeds): bank tasks that disagree are what widens the CIs.
    `holds` is None where there is no slope CI (too few rates or groups)."""
    planted = sorted((f, a) for a, f in flips.items() if a in pooled)
    rates = [f for f, _ in planted]
    effects = [float(pooled[a]["effect"]) for _, a in planted]
    out: dict[str, Any] = {
        "method": "first-order", "flips": rates, "planted_means": effects, "slope": None,
        "slope_ci": [None, None], "slope_ci_reason": None, "spearman": None,
        "placebo": placebo, "placebo_mean": None, "placebo_ci": [None, None],
        "placebo_covers_zero": None, "tests_effect": None, "tests_ci": [None, None],
        "tests_detected": None,
    }  # fmt: skip
    if len(planted) >= MIN_ARMS:
        rho = spearman(rates, effects)
        out["spearman"] = None if np.isnan(rho) else rho
        out["slope"] = ols(rates, effects)[0]
        boot, n_units = _effect_draws(pooled, [a for _, a in planted], rule)
        out |= _banks_drawn(pooled, [a for _, a in planted])
        slopes, _ = _lines(boot, np.asarray(rates, dtype=float))
        ci = percentile_ci(slopes, n_units, rule)
        out["slope_ci"], out["slope_ci_reason"] = [ci.low, ci.high], ci.reason
    else:
        out["slope_ci_reason"] = f"{len(planted)} planted flip rates (at least 3 are needed)"
    if placebo is not None and placebo in pooled:
        p = pooled[placebo]
        out |= {"placebo_mean": p["effect"], "placebo_ci": [p["ci_low"], p["ci_high"]],
                "placebo_covers_zero": None if p["ci_low"] is None
                else bool(p["ci_low"] <= 0 <= p["ci_high"])}  # fmt: skip
    tests = next((a for f, a in planted if f == 0.0), None)
    if tests is not None:
        t = pooled[tests]
        out |= {
            "tests_effect": t["effect"],
            "tests_ci": [t["ci_low"], t["ci_high"]],
            "tests_detected": None if t["ci_low"] is None else bool(t["ci_low"] > 0),
        }
        if "num_bank" in t and sum(t["den"]) > 0:
            out["tests_bank"] = _bank_signs(t)
    low, high = out["slope_ci"]
    out["holds"] = (None if high is None
                    else bool(high < 0) and out["placebo_covers_zero"] is not False)  # fmt: skip
    return out


def _bank_signs(row: Mapping[str, Any]) -> dict[str, int]:
    """On how many bank tasks an arm's effect (pooled over tasks and seeds: Σ_t N_tb / Σ_t D_t,
    from `pooled_effects`' working arrays) is above 0 and on how many below."""
    each = np.asarray(row["num_bank"], dtype=float).sum(axis=0) / sum(row["den"])
    return {"raised": int((each > 0).sum()), "lowered": int((each < 0).sum()),
            "tasks": int(each.size)}  # fmt: skip


def judges_vs_planted(
    pooled: Mapping[str, Mapping[str, Any]],
    audits: Mapping[str, Mapping[str, Any]],
    flips: Mapping[str, float],
    placebo: str | None,
    rule: CIRule,
    figure: str = "signal_fidelity",
    figure_draws: Mapping[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Each judge arm (neither planted nor the placebo) against the line the planted arms draw.

    The planted arms lie near one line by construction: flipping a share p of the tests'
    verdicts scales both their audit figure and their first-order effect by about 1 − 2p. A
    rank correlation over every arm is therefore mostly theirs; a judge's own test is its
    distance from their line. `line`: least squares of the planted arms' pooled effect on
    their `figure`; per judge, `predicted` = intercept + slope · its figure and `residual` =
    its effect − predicted, with a percentile CI over the same (task, bank task) resamples as
    `pooled_effects`: every arm's effect and the line recomputed on each resample, and with
    `figure_draws` (arm -> its figure on each of those resamples, `arm_figure_draws`) every
    arm's figure too, so that the CI carries the figures' spread over tasks as well as the
    effects' (`figure_resampled`); without them the figures are held at their values, as in
    `predict`; a resample with no line is counted (`undefined`). The judges are one family
    of tests: each CI is at 1 − (1 − level) / m for m judges (Bonferroni), so that no judge is
    called off the line by chance among several. The placebo (`placebo`: its rewards unrelated
    to the code) is set against the line too, at the same level, apart from the judges
    (`placebo`): a real arm whose effect the line should also predict. No line from fewer
    than `MIN_ARMS` planted arms with the figure."""
    has = {a for a in pooled if audits.get(a, {}).get(figure) is not None}
    planted = sorted(a for a in flips if a in has)
    judges = sorted(a for a in has if a not in flips and a != placebo)
    resampled = figure_draws is not None
    out: dict[str, Any] = {"figure": figure, "planted": planted, "slope": None,
                           "intercept": None, "figure_resampled": resampled, "judges": {},
                           "reason": None}  # fmt: skip
    if len(planted) < MIN_ARMS:
        out["reason"] = f"{len(planted)} planted arms with {figure} (at least {MIN_ARMS})"
        return out
    x = np.array([float(audits[a][figure]) for a in planted])
    slope, intercept = ols(x.tolist(), [float(pooled[a]["effect"]) for a in planted])
    out |= {"slope": slope, "intercept": intercept}
    control = [placebo] if placebo in has else []
    if not judges and not control:
        return out
    boot, n_units = _effect_draws(pooled, planted + judges + control, rule)
    out |= _banks_drawn(pooled, planted + judges + control)
    family = replace(rule, level=1 - (1 - rule.level) / max(len(judges), 1))
    xs = x if figure_draws is None else np.column_stack([figure_draws[p] for p in planted])
    lines = _lines(boot[:, : len(planted)], xs)
    for j, arm in enumerate(judges + control):
        at = figure_draws[arm] if figure_draws is not None else None
        value, effect = float(audits[arm][figure]), float(pooled[arm]["effect"])
        row = _off_line(value, effect, (slope, intercept), lines, boot[:, len(planted) + j],
                        at, n_units, family)  # fmt: skip
        if arm in control:
            out["placebo"] = {"arm": arm, **row}
        else:
            out["judges"][arm] = row
    return out


def _off_line(
    value: float,
    effect: float,
    line: tuple[float, float],
    lines: tuple[np.ndarray, np.ndarray],
    effect_draws: np.ndarray,
    figure_draws: np.ndarray | None,
    n_units: int,
    family: CIRule,
) -> dict[str, Any]:
    """One arm's distance from the planted line (`line`: slope, intercept; `lines`: the
    line on each resample), with its percentile CI at the family's level."""
    slope, intercept = line
    b, a = lines
    predicted = intercept + slope * value
    at = figure_draws if figure_draws is not None else value
    ci = percentile_ci(effect_draws - (a + b * at), n_units, family)
    return {
        "figure": value, "effect": effect, "predicted": predicted,
        "residual": effect - predicted, "ci_low": ci.low,
        "ci_high": ci.high, "ci_reason": ci.reason, "ci_level": family.level,
        "undefined": ci.undefined_resamples, "n_tasks": n_units,
    }  # fmt: skip


def arms_apart(
    audits: Mapping[str, Mapping[str, Any]],
    effects: Mapping[str, float],
    flips: Mapping[str, float],
    placebo: str | None,
    figure: str = "signal_fidelity",
) -> dict[str, Any]:
    """The audit-predicts-training claim split by kind of arm, so that no headline figure is
    carried by the planted arms. `effects`: arm -> its effect (the pooled first-order effect,
    or the mean over seeds). The planted arms are built to lie on one line (flipping a share
    p of the tests' verdicts scales both their figure and their effect by about 1 − 2p): their
    ρ calibrates the effect measure and says nothing about judges. The others (your judges
    and the placebo) are the evidence: each arm's figure and effect, and their ρ where there
    are at least `MIN_ARMS` of them (never a CI: so few arms give none)."""
    have = {a: float(m[figure]) for a, m in audits.items()
            if m.get(figure) is not None and a in effects}  # fmt: skip

    def rho(arms: list[str]) -> float | None:
        if len(arms) < MIN_ARMS:
            return None
        r = spearman([have[a] for a in arms], [effects[a] for a in arms])
        return None if np.isnan(r) else r

    planted = sorted(a for a in have if a in flips)
    others = sorted(a for a in have if a not in flips)
    kind = {a: "placebo" if a == placebo else "judge" for a in others}
    return {
        "figure": figure,
        "planted": {"arms": planted, "n_arms": len(planted), "spearman": rho(planted)},
        "others": {
            "arms": [{"arm": a, "kind": kind[a], "figure": have[a], "effect": effects[a]}
                     for a in sorted(others, key=lambda a: -have[a])],
            "n_arms": len(others), "spearman": rho(others),
            "reason": None if len(others) >= MIN_ARMS
            else f"n = {len(others)} arms: too few for a rank correlation (minimum {MIN_ARMS})",
        },
        "all": {"n_arms": len(have), "spearman": rho(sorted(have))},
    }  # fmt: skip
