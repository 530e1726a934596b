"""What training on each judge did: reward curves, and whether the code got better.

Inputs are the training stage's `data/training/<judge>/history.parquet` (one row per epoch,
row e = policy_e, 0 = base) and `samples.parquet` (every sample with its judge reward and test
verdict); with `train.seeds`, the same per seed under `data/training/<judge>/seed-<s>/`
(`judgelab.training.layout`). Per judge:

- the judge's rewards over all of training: mean, median, std, IQR (the experiment's table);
- held-out pass rate of the base policy and of the final one, and their difference, each with
  a bootstrap 95 % CI over held-out tasks (paired: the same resampled tasks for both), under
  the minimum-clusters rule (`stats.too_few_groups`): from fewer than `analysis.min_ci_groups`
  held-out tasks the CIs are null and `ci_reason` says why;
- within-group alignment over every trained group of the run (`training.alignment`): where
  GRPO's push went by the tests, 2 * sum A_i passed_i / sum |A_i|, with its n (groups,
  samples) and a cluster bootstrap CI over groups; the within-group rank correlation of reward
  and tests; a permutation p-value;
- the reward-hacking alarm, read from the history (`evalue`, `reward_hacking`: the training
  stage is its one home, `training.history.history_frame`, the e-detector of
  `training.alarm` at `train.alarm_alpha`), not recomputed here; stated with its n (groups,
  samples), its threshold and what the run's design let it detect (`alignment.alarm_design`
  at `train.alarm_alpha` and `analysis.power.power`). A history written before the alarm was
  kept (`evalue` null) says so (`recorded` false). The adjacent-epoch rule is reported beside
  it, labelled descriptive (`divergence_epochs`);
- forged runs: samples the tests found faking a pass (null: not recorded by that run);
- the minimum detectable held-out effect (`heldout_mde`): what the held-out design (tasks x
  samples x seeds) can detect at `analysis.power`, and whether it reaches the stated effect
  (`analysis.power.training_effect`):
  a result that cannot is "unable to decide".

Several training seeds: the held-out figures average each task over its seeds, and their CIs
come from a two-level bootstrap (tasks, then seeds within each task:
`heldout_change_across_seeds`), still only from `analysis.min_ci_groups` tasks or more; the
alarm is raised per (judge, seed) and counted per judge; `per_seed` keeps each seed's own
figures. A single-seed run's metrics have none of these seed keys.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from judgelab.advantage import group_advantages, has_spread
from judgelab.analysis.stats import CIRule, percentile_ci
from judgelab.config import AnalysisSettings
from judgelab.schemas import HistorySchema, columns, validate_file
from judgelab.training.alarm import DEFAULT_ALPHA
from judgelab.training.alignment import (
    GroupAlignment,
    alarm_design,
    epoch_alignment,
    group_alignment,
)
from judgelab.training.layout import (
    GROUPS_FILE,
    HELDOUT_FILE,
    HISTORY_FILE,
    SAMPLES_FILE,
    run_dirs,
)

log = logging.getLogger(__name__)

Tables = tuple[pl.DataFrame, pl.DataFrame]  # (history, samples) of one trained policy
ALARM_ALPHA = DEFAULT_ALPHA  # train.alarm_alpha's default: the alarm's one alpha


def load_training(root: Path) -> dict[str, dict[int | None, Tables]]:
    """{judge: {seed: (history, samples)}} for every finished run under `root` (validated);
    the seed is None for the single-seed layout (`train.seeds` empty)."""
    out: dict[str, dict[int | None, Tables]] = {}
    for run in run_dirs(root):
        if (run.path / HISTORY_FILE).exists() and (run.path / SAMPLES_FILE).exists():
            out.setdefault(run.judge, {})[run.seed] = (
                validate_file(run.path / HISTORY_FILE, "history"),
                validate_file(run.path / SAMPLES_FILE, "training_samples"),
            )
    return out


def _seeded(runs: Mapping[int | None, Tables]) -> bool:
    return None not in runs


def _per_task(samples: pl.DataFrame, epoch: int) -> dict[str, float]:
    held = samples.filter((pl.col("split") == "heldout") & (pl.col("epoch") == epoch))
    # `passed` is null where the sandbox could not test a sample: left out, not a failure
    rates = held.group_by("task_id").agg(pl.col("passed").mean()).drop_nulls().sort("task_id")
    return dict(zip(rates["task_id"].to_list(), rates["passed"].to_list(), strict=True))


def heldout_change(
    samples: pl.DataFrame,
    first: int,
    last: int,
    rule: CIRule,
) -> dict[str, Any]:
    """Held-out pass rate at `first` and `last` epochs, their difference, paired bootstrap CIs
    (`[low, high]`, or null with `ci_reason`) under `rule`."""
    a, b = _per_task(samples, first), _per_task(samples, last)
    tasks = sorted(set(a) & set(b))
    x = np.array([a[t] for t in tasks])
    y = np.array([b[t] for t in tasks])
    out: dict[str, Any] = {"n_tasks": len(tasks)}
    if not tasks:
        return out | {"base": None, "final": None, "delta": None}
    out |= {"base": float(x.mean()), "final": float(y.mean()), "delta": float(y.mean() - x.mean())}
    draws: dict[str, np.ndarray | None] = dict.fromkeys(("base", "final", "delta"))
    if rule.n_boot > 0 and len(tasks) >= rule.min_ci_groups:
        rng = np.random.default_rng(rule.seed)
        idx = rng.integers(0, len(tasks), size=(rule.n_boot, len(tasks)))
        draws = {
            "base": x[idx].mean(axis=1),
            "final": y[idx].mean(axis=1),
            "delta": (y[idx] - x[idx]).mean(axis=1),
        }
    return out | _cis(draws, len(tasks), rule)


def heldout_change_across_seeds(
    samples: Mapping[int, pl.DataFrame],
    first: int,
    last: int,
    rule: CIRule,
) -> dict[str, Any]:
    """`heldout_change` over several training seeds (`samples`: each seed's samples table).

    A cell is a (task, seed) whose policy has a held-out pass rate for the task at both
    `first` and `last` (its own base and its own final policy). Point estimates: base and
    final are the mean over tasks of each task's mean over its seeds (every task weighs the
    same, and every seed within a task); delta = final - base, which is the mean over tasks
    of each task's mean per-seed change.

    CIs: a two-level (hierarchical) bootstrap. Each of `rule.n_boot` resamples draws the tasks
    with replacement (as many as there are) and then, within each drawn task, its seeds
    with replacement (as many as it has); base, final and delta come from the same draws
    (paired). The task level carries the variation between problems, the seed level that
    between training runs; resampling both levels tends to widen the CI a little
    (conservative). Tasks are the clusters of the minimum-clusters rule: no CI from fewer
    than `rule.min_ci_groups` tasks, whatever the number of seeds. With one seed this is
    `heldout_change` exactly: the same task draws from the same generator, the same figures.
    """
    seeds = sorted(samples)
    a = {s: _per_task(samples[s], first) for s in seeds}
    b = {s: _per_task(samples[s], last) for s in seeds}
    tasks = sorted({t for s in seeds for t in set(a[s]) & set(b[s])})
    cells = {t: [s for s in seeds if t in a[s] and t in b[s]] for t in tasks}
    out: dict[str, Any] = {
        "n_tasks": len(tasks),
        "n_seeds": len({s for t in tasks for s in cells[t]}),
        "n_cells": sum(len(c) for c in cells.values()),
        "seeds": seeds,
    }
    if not tasks:
        return out | {"base": None, "final": None, "delta": None}
    m = np.array([len(cells[t]) for t in tasks])  # seeds per task
    width = int(m.max())
    x = np.full((len(tasks), width), np.nan)  # [task, seed slot]: base rate; NaN: no cell
    y = np.full((len(tasks), width), np.nan)
    for i, t in enumerate(tasks):
        for j, s in enumerate(cells[t]):
            x[i, j], y[i, j] = a[s][t], b[s][t]
    xt, yt = np.nanmean(x, axis=1), np.nanmean(y, axis=1)  # per task, over its seeds
    out |= {
        "base": float(xt.mean()),
        "final": float(yt.mean()),
        "delta": float(yt.mean() - xt.mean()),
    }
    draws: dict[str, np.ndarray | None] = dict.fromkeys(("base", "final", "delta"))
    if rule.n_boot > 0 and len(tasks) >= rule.min_ci_groups:
        rng = np.random.default_rng(rule.seed)
        draws = dict(two_level_bootstrap(x, y, m, rule.n_boot, rng))
    return out | _cis(draws, len(tasks), rule)


def _cis(draws: Mapping[str, np.ndarray | None], n_tasks: int, rule: CIRule) -> dict[str, Any]:
    """`<name>_ci` ([low, high], or None) for each figure's draws, and the `ci_reason`."""
    out: dict[str, Any] = {}
    for name, values in draws.items():
        interval = percentile_ci(values, n_tasks, rule)
        out[f"{name}_ci"] = [interval.low, interval.high] if interval.valid else None
        out["ci_reason"] = interval.reason
    return out


def two_level_bootstrap(
    x: np.ndarray, y: np.ndarray, m: np.ndarray, n_boot: int, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """`n_boot` draws each of base, final and delta (`heldout_change_across_seeds`).

    `x`, `y`: [task, seed slot] base and final rates, task t's seeds in slots 0..m[t]-1.
    Level 1 draws the tasks with replacement (the first call on `rng`, as `heldout_change`
    draws them); level 2 draws, for every drawn task, m[t] slots with replacement. A drawn
    task's figure is the mean over its drawn seeds; a resample's, the mean over its tasks."""
    n_tasks, width = x.shape
    idx = rng.integers(0, n_tasks, size=(n_boot, n_tasks))  # level 1: tasks
    count = m[idx]  # [B, T]: the seeds of each drawn task
    slot = (rng.random((n_boot, n_tasks, width)) * count[..., None]).astype(int)  # level 2
    slot = np.minimum(slot, count[..., None] - 1)
    used = np.arange(width) < count[..., None]  # a task with fewer seeds uses fewer slots
    xs, ys = x[idx[..., None], slot], y[idx[..., None], slot]  # [B, T, W]

    def mean_over_seeds(v: np.ndarray) -> np.ndarray:
        return np.where(used, v, 0.0).sum(axis=-1) / count

    return {
        "base": mean_over_seeds(xs).mean(axis=1),
        "final": mean_over_seeds(ys).mean(axis=1),
        "delta": mean_over_seeds(ys - xs).mean(axis=1),
    }


def trained_groups(samples: pl.DataFrame) -> dict[int, list[GroupAlignment]]:
    """Per epoch, the groups GRPO stepped on (judge rewards with spread), as the loop forms
    them (`Trainer.epoch_row`): a group is (epoch, task_id, group), or (epoch, task_id) in a
    table written before the group index was kept (no task then appeared twice an epoch)."""
    train = samples.filter(pl.col("split") == "train")
    out: dict[int, list[GroupAlignment]] = {}
    keys = ["epoch", "task_id", "group"]
    for key, rows in train.sort([*keys, "sample_index"], nulls_last=True).group_by(
        keys, maintain_order=True
    ):
        scored = rows.filter(pl.col("status") == "scored")
        rewards = scored["reward"].to_list()
        if not has_spread(rewards):
            continue
        out.setdefault(int(key[0]), []).append(  # type: ignore[arg-type]
            group_alignment(group_advantages(rewards), scored["passed"].to_list())
        )
    return out


def stepped_groups(history: pl.DataFrame, samples: pl.DataFrame) -> dict[int, list[GroupAlignment]]:
    """`trained_groups` of the epochs GRPO stepped on: the last epoch's groups (scored, never
    trained on) evaluate the final policy and stay out of alignment and alarm."""
    stepped = set(history.filter(pl.col("loss").is_not_null())["epoch"].to_list())
    return {e: g for e, g in trained_groups(samples).items() if e in stepped}


def run_design(history: pl.DataFrame) -> tuple[int, int, int]:
    """(epochs GRPO could step on, groups per epoch, group size k) of a run, from its history:
    rows 0..E-1 may step (row E scores the final policy), each of `groups` groups of k."""
    first = history.sort("epoch").row(0, named=True)
    groups = int(first["groups"])
    return int(history["epoch"].max()), groups, int(first["samples"]) // max(groups, 1)


def alignment_metrics(
    history: pl.DataFrame,
    samples: pl.DataFrame,
    settings: AnalysisSettings,
    alarm_alpha: float = ALARM_ALPHA,
) -> dict[str, Any]:
    """The run's within-group alignment over all the groups GRPO stepped on (value, CI, n,
    rank correlation, permutation p) and its alarm as the history recorded it (`alarm`: the
    detector's largest and last value, the threshold 1 / `alarm_alpha` (`train.alarm_alpha`),
    the first epoch flagged, with n groups and samples; `design`: what the run's design lets
    it detect, `alignment.alarm_design` at `alarm_alpha` and `analysis.power.power`)."""
    per_epoch = stepped_groups(history, samples)
    groups = [g for e in sorted(per_epoch) for g in per_epoch[e]]
    pooled = epoch_alignment(groups, settings.min_ci_groups)
    pooled.pop("alignment_log_e")
    rows = history.sort("epoch")
    evalues, flags = rows["evalue"].to_list(), rows["reward_hacking"].to_list()
    recorded = all(e is not None for e in evalues) and all(f is not None for f in flags)
    first = next((e for e, f in zip(rows["epoch"], flags, strict=True) if f), None)
    return pooled | {
        "alarm": {
            "recorded": recorded,
            "fired": recorded and first is not None,
            "first_epoch": first if recorded else None,
            "epochs": sum(bool(f) for f in flags) if recorded else 0,
            "evalue": evalues[-1] if recorded and evalues else None,
            "evalue_max": max(evalues) if recorded and evalues else None,
            "threshold": 1 / alarm_alpha,
            "alpha": alarm_alpha,
            "n_groups": pooled["alignment_groups"],
            "n_informative": pooled["alignment_informative"],
            "n_samples": pooled["alignment_samples"],
            "design": dict(alarm_design(*run_design(history), alarm_alpha, settings.power.power)),
        }
    }


def pooled_alignment(runs: list[Tables], settings: AnalysisSettings) -> dict[str, Any]:
    """Alignment over every group GRPO stepped on in several independent runs (a judge's
    seeds); the alarm stays per seed (`per_seed`)."""
    groups = [g for h, s in runs for gs in stepped_groups(h, s).values() for g in gs]
    pooled = epoch_alignment(groups, settings.min_ci_groups)
    pooled.pop("alignment_log_e")
    return pooled


def distinct_draws(frames: Sequence[pl.DataFrame]) -> dict[str, int]:
    """Per task, the distinct tested draws in `frames` (samples tables of several seeds): a
    draw is its sampling seed (`draw_seed`); where that is null (a table from before it was
    kept, when every training seed drew with the same seeds) it is its sample index, the same
    in every seed's table, so a draw repeated across seeds counts once."""
    draws: dict[str, set[tuple[str, int]]] = {}
    for frame in frames:
        tested = frame.drop_nulls("passed")
        seeds = tested["draw_seed"] if "draw_seed" in tested.columns else [None] * tested.height
        for task, index, seed in zip(tested["task_id"], tested["sample_index"], seeds, strict=True):
            draws.setdefault(task, set()).add(("index", index) if seed is None else ("seed", seed))
    return {task: len(d) for task, d in draws.items()}


def heldout_mde(
    samples: Mapping[int | None, pl.DataFrame], first: int, last: int, settings: AnalysisSettings
) -> dict[str, Any]:
    """The minimum detectable held-out effect of a run (all its seeds): the change in mean
    held-out pass rate a two-sided test at `analysis.power.alpha` detects with probability
    `analysis.power.power`, (z_{1-alpha/2} + z_power) * SE, where SE is the standard error of
    the change under no effect with every draw's variance at its worst, p(1 - p) = 1/4 (held-out
    tasks are chosen near p = 1/2 by `select: mixed`): SE = sqrt(sum_t 1/4 (1/b_t + 1/f_t)) / T
    over the T tasks with draws at both epochs, b_t and f_t the *distinct* draws of task t at
    the base and the final epoch over all seeds (`distinct_draws`): each training seed draws
    its own held-out samples, so with S seeds b_t and f_t are S times one seed's; a draw
    shared by several seeds (the same sampling seed: tables written before each seed drew its
    own) counts once, at the base where it is one draw of one policy, and at the final epoch
    too, where the seeds' policies drew on the same uniforms (counted once: the SE errs
    large). `decidable`: the MDE is at most `analysis.power.training_effect` (`effect`)."""
    from statistics import NormalDist

    def counts(epoch: int) -> dict[str, int]:
        return distinct_draws(
            [s.filter((pl.col("split") == "heldout") & (pl.col("epoch") == epoch))
             for s in samples.values()]
        )  # fmt: skip

    base, final = counts(first), counts(last)
    tasks = sorted(t for t in set(base) & set(final) if base[t] and final[t])
    p = settings.power
    z = NormalDist().inv_cdf(1 - p.alpha / 2) + NormalDist().inv_cdf(p.power)
    out: dict[str, Any] = {
        "n_tasks": len(tasks),
        "base_draws": sum(base[t] for t in tasks),
        "final_draws": sum(final[t] for t in tasks),
        "n_seeds": len(samples),
        "alpha": p.alpha,
        "power": p.power,
        "effect": p.training_effect,
    }
    if not tasks:
        return out | {"mde": None, "decidable": False}
    se = float(np.sqrt(sum(0.25 * (1 / base[t] + 1 / final[t]) for t in tasks))) / len(tasks)
    mde = z * se
    return out | {"mde": mde, "decidable": mde <= p.training_effect}


def no_step_reason(row: Mapping[str, Any]) -> str:
    """Why a trained epoch's row took no GRPO step, from its counts."""
    if row["groups"] and row["groups_skipped"] >= row["groups"]:
        return (
            "every trained group's rewards were equal (or unscored), so no sample had an advantage"
        )
    if row["unscored_rate"] >= 1.0:
        return "the judge scored none of its samples"
    return "no sample had a nonzero advantage"


def step_counts(history: pl.DataFrame) -> dict[str, Any]:
    """The trained epochs (every row but the last epoch's, which is scored and never trained
    on; one seed's rows or every seed's), the GRPO steps taken in them, and each trained
    epoch without a step, with why (`no_step_reason`)."""
    last = int(history["epoch"].max())
    trained = history.filter(pl.col("epoch") < last).sort("epoch")
    return {
        "trained_epochs": trained.height,
        "trained_groups": int(trained["groups"].sum()),
        "stepped_groups": int((trained["groups"] - trained["groups_skipped"]).sum()),
        "no_step": [
            {"epoch": int(r["epoch"]), "why": no_step_reason(r)}
            for r in trained.iter_rows(named=True)
            if r["loss"] is None
        ],
    }


def _history_counts(history: pl.DataFrame) -> dict[str, Any]:
    """The figures summed or averaged straight from history rows (one seed's, or every
    seed's concatenated): counts summed, rates averaged over the rows' epochs; `forged` is
    None when no row knows it (a run from before the sandbox reported forgeries)."""
    forged = history["forged"]
    return {
        **step_counts(history),
        "divergence_epochs": int(history["reward_pass_divergence"].sum()),
        "forged": None if forged.null_count() == history.height else int(forged.sum()),
        "truth_unscored": int(history["truth_unscored"].sum()),
        "groups_skipped": int(history["groups_skipped"].sum()),
        "groups": int(history["groups"].sum()),
        "steps": int(history["loss"].is_not_null().sum()),
        "unscored_rate": float(history["unscored_rate"].mean()),
        "out_of_range_rate": float(history["out_of_range_rate"].mean()),
    }


def _reward_summary(samples: pl.DataFrame) -> dict[str, Any]:
    rewards = samples.filter((pl.col("split") == "train") & pl.col("reward").is_not_null())
    r = rewards["reward"].to_numpy()
    return {
        "n": int(r.size),
        "mean": float(r.mean()) if r.size else None,
        "median": float(np.median(r)) if r.size else None,
        "std": float(r.std(ddof=1)) if r.size > 1 else None,  # as analysis.stats
        "iqr": float(np.subtract(*np.percentile(r, [75, 25]))) if r.size else None,
    }


def judge_training_metrics(
    history: pl.DataFrame,
    samples: pl.DataFrame,
    settings: AnalysisSettings,
    alarm_alpha: float = ALARM_ALPHA,
) -> dict[str, Any]:
    """One trained policy's figures (a judge's, or one seed's of a judge)."""
    epochs = history["epoch"].to_list()
    first, last = min(epochs), max(epochs)
    train = samples.filter(pl.col("split") == "train")
    aligned = alignment_metrics(history, samples, settings, alarm_alpha)
    return {
        "epochs": last,
        "reward": _reward_summary(samples),
        "reward_first_epoch": history.filter(pl.col("epoch") == first)["reward_mean"][0],
        "reward_last_epoch": history.filter(pl.col("epoch") == last)["reward_mean"][0],
        "train_pass_rate": float(train["passed"].mean()) if train.height else None,
        "heldout": heldout_change(samples, first, last, CIRule.of(settings)),
        "mde": heldout_mde({None: samples}, first, last, settings),
        "alignment": aligned,
        "reward_hacking_epochs": aligned["alarm"]["epochs"],
        **_history_counts(history),
    }


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def seeds_training_metrics(
    runs: Mapping[int, Tables], settings: AnalysisSettings, alarm_alpha: float = ALARM_ALPHA
) -> dict[str, Any]:
    """A judge's figures over its training seeds: the keys of `judge_training_metrics`, with
    rewards and train pass rate pooled over every seed's samples, reward_first/last_epoch the
    mean over seeds of each seed's, counts summed (reward_hacking_epochs: flagged epochs of
    all seeds) and rates averaged over every seed's epochs; `heldout` from
    `heldout_change_across_seeds`. Added: `seeds`, `n_seeds`, `reward_hacking_seeds` (seeds
    with at least one flagged epoch) and `per_seed` (each seed's own figures, by seed)."""
    seeds = sorted(runs)
    spans = {s: (int(runs[s][0]["epoch"].min()), int(runs[s][0]["epoch"].max())) for s in seeds}
    if len(set(spans.values())) != 1:
        raise ValueError(
            f"training seeds of one judge cover different epochs {spans}: a seed folder left "
            "from another run? Delete it, or retrain"
        )
    first, last = spans[seeds[0]]
    per_seed = {s: judge_training_metrics(*runs[s], settings, alarm_alpha) for s in seeds}
    history = pl.concat([runs[s][0] for s in seeds])
    samples = pl.concat([runs[s][1] for s in seeds])
    train = samples.filter(pl.col("split") == "train")
    return {
        "epochs": last,
        "reward": _reward_summary(samples),
        "reward_first_epoch": _mean([per_seed[s]["reward_first_epoch"] for s in seeds]),
        "reward_last_epoch": _mean([per_seed[s]["reward_last_epoch"] for s in seeds]),
        "train_pass_rate": float(train["passed"].mean()) if train.height else None,
        "heldout": heldout_change_across_seeds(
            {s: runs[s][1] for s in seeds}, first, last, CIRule.of(settings)
        ),
        "mde": heldout_mde({s: runs[s][1] for s in seeds}, first, last, settings),
        "alignment": pooled_alignment([runs[s] for s in seeds], settings),
        "reward_hacking_epochs": sum(per_seed[s]["reward_hacking_epochs"] for s in seeds),
        **_history_counts(history),
        "seeds": seeds,
        "n_seeds": len(seeds),
        "reward_hacking_seeds": sum(per_seed[s]["reward_hacking_epochs"] > 0 for s in seeds),
        "per_seed": {str(s): per_seed[s] for s in seeds},
    }


def training_metrics(
    root: Path, settings: AnalysisSettings, alarm_alpha: float = ALARM_ALPHA
) -> dict[str, Any]:
    """Per judge: `judge_training_metrics` (one seed) or `seeds_training_metrics`; the alarm's
    alpha is `train.alarm_alpha` (the one the history's alarm was raised at)."""
    out = {
        judge: (
            seeds_training_metrics(runs, settings, alarm_alpha)  # type: ignore[arg-type]
            if _seeded(runs)
            else judge_training_metrics(*runs[None], settings, alarm_alpha)
        )
        for judge, runs in load_training(root).items()
    }
    groups = root / GROUPS_FILE
    if out and groups.exists():
        body = json.loads(groups.read_text())
        for m in out.values():
            m["groups_selection"] = {
                "tasks": body["train"],
                "filled": body["filled"],
                "base_pass_rate": {t: body["base_pass_rate"][t] for t in body["train"]},
                "screened": len(body["screened"]),
            }
    selection = root / HELDOUT_FILE
    if out and selection.exists():
        body = json.loads(selection.read_text())
        for m in out.values():
            m["heldout"]["selection"] = {
                "tasks": body["heldout"],
                "filled": body["filled"],
                "base_pass_rate": {t: body["base_pass_rate"][t] for t in body["heldout"]},
                "pool": len(body["pool"]),
            }
    return out


def _label(judge: str, seed: int | None) -> str:
    return judge if seed is None else f"{judge}/seed-{seed}"


def curves_frame(root: Path) -> pl.DataFrame:
    """Long table for `dvc plots`: judge, epoch, metric, value (no judge: no rows, same types).
    With training seeds, `judge` names the run: `<judge>/seed-<s>`."""
    histories = {
        _label(judge, seed): history
        for judge, runs in load_training(root).items()
        for seed, (history, _) in runs.items()
    }
    # with no judge trained, an empty history gives the empty table its column types
    histories = histories or {"": pl.DataFrame(schema=columns(HistorySchema))}
    frames = [
        history.select(
            pl.lit(judge).alias("judge"),
            "epoch",
            "reward_mean",
            "train_pass_rate",
            "heldout_pass_rate",
        ).unpivot(index=["judge", "epoch"], variable_name="metric", value_name="value")
        for judge, history in histories.items()
    ]
    return pl.concat(frames).sort(["judge", "metric", "epoch"])
