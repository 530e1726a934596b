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
- reward-hacking epochs: the judge's mean reward rose while the test pass rate of the same
  training samples fell.

Several training seeds: the held-out figures average each task over its seeds, and their CIs
come from a two-level bootstrap (tasks, then seeds within each task:
`heldout_change_across_seeds`), still only from `analysis.min_ci_groups` tasks or more; the
alarm is raised per (judge, seed) and counted per judge; `per_seed` keeps each seed's own
figures. A single-seed run's metrics have exactly the keys they had before seeds existed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.stats import MIN_CI_GROUPS, percentile_ci
from judgelab.config import AnalysisSettings
from judgelab.schemas import HistorySchema, columns, validate_file
from judgelab.training.layout import HELDOUT_FILE, HISTORY_FILE, SAMPLES_FILE, run_dirs

log = logging.getLogger(__name__)

Tables = tuple[pl.DataFrame, pl.DataFrame]  # (history, samples) of one trained policy


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
    n_boot: int,
    seed: int,
    min_groups: int = MIN_CI_GROUPS,
) -> dict[str, Any]:
    """Held-out pass rate at `first` and `last` epochs, their difference, paired bootstrap CIs
    (`[low, high]`, or null with `ci_reason`)."""
    a, b = _per_task(samples, first), _per_task(samples, last)
    tasks = sorted(set(a) & set(b))
    x = np.array([a[t] for t in tasks])
    y = np.array([b[t] for t in tasks])
    out: dict[str, Any] = {"n_tasks": len(tasks)}
    if not tasks:
        return out | {"base": None, "final": None, "delta": None}
    out |= {"base": float(x.mean()), "final": float(y.mean()), "delta": float(y.mean() - x.mean())}
    draws: dict[str, np.ndarray | None] = dict.fromkeys(("base", "final", "delta"))
    if n_boot > 0 and len(tasks) >= min_groups:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, len(tasks), size=(n_boot, len(tasks)))
        draws = {
            "base": x[idx].mean(axis=1),
            "final": y[idx].mean(axis=1),
            "delta": (y[idx] - x[idx]).mean(axis=1),
        }
    return out | _cis(draws, len(tasks), min_groups)


def heldout_change_across_seeds(
    samples: Mapping[int, pl.DataFrame],
    first: int,
    last: int,
    n_boot: int,
    seed: int,
    min_groups: int = MIN_CI_GROUPS,
) -> dict[str, Any]:
    """`heldout_change` over several training seeds (`samples`: each seed's samples table).

    A cell is a (task, seed) whose policy has a held-out pass rate for the task at both
    `first` and `last` (its own base and its own final policy). Point estimates: base and
    final are the mean over tasks of each task's mean over its seeds (every task weighs the
    same, and every seed within a task); delta = final - base, which is the mean over tasks
    of each task's mean per-seed change.

    CIs: a two-level (hierarchical) bootstrap. Each of `n_boot` resamples draws the tasks
    with replacement (as many as there are) and then, within each drawn task, its seeds
    with replacement (as many as it has); base, final and delta come from the same draws
    (paired). The task level carries the variation between problems, the seed level that
    between training runs; resampling both levels tends to widen the CI a little
    (conservative). Tasks are the clusters of the minimum-clusters rule: no CI from fewer
    than `min_groups` tasks, whatever the number of seeds. With one seed this is
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
    if n_boot > 0 and len(tasks) >= min_groups:
        draws = dict(two_level_bootstrap(x, y, m, n_boot, np.random.default_rng(seed)))
    return out | _cis(draws, len(tasks), min_groups)


def _cis(draws: Mapping[str, np.ndarray | None], n_tasks: int, min_groups: int) -> dict[str, Any]:
    """`<name>_ci` ([low, high], or None) for each figure's draws, and the `ci_reason`."""
    out: dict[str, Any] = {}
    for name, values in draws.items():
        interval = percentile_ci(values, n_tasks, min_groups)
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
    history: pl.DataFrame, samples: pl.DataFrame, settings: AnalysisSettings
) -> dict[str, Any]:
    """One trained policy's figures (a judge's, or one seed's of a judge)."""
    epochs = history["epoch"].to_list()
    first, last = min(epochs), max(epochs)
    train = samples.filter(pl.col("split") == "train")
    return {
        "epochs": last,
        "reward": _reward_summary(samples),
        "reward_first_epoch": history.filter(pl.col("epoch") == first)["reward_mean"][0],
        "reward_last_epoch": history.filter(pl.col("epoch") == last)["reward_mean"][0],
        "train_pass_rate": float(train["passed"].mean()) if train.height else None,
        "heldout": heldout_change(
            samples, first, last, settings.bootstrap, settings.seed, settings.min_ci_groups
        ),
        "reward_hacking_epochs": int(history["reward_hacking"].sum()),
        "truth_unscored": int(history["truth_unscored"].sum()),
        "groups_skipped": int(history["groups_skipped"].sum()),
        "groups": int(history["groups"].sum()),
        "steps": int(history["loss"].is_not_null().sum()),
        "unscored_rate": float(history["unscored_rate"].mean()),
        "out_of_range_rate": float(history["out_of_range_rate"].mean()),
    }


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def seeds_training_metrics(
    runs: Mapping[int, Tables], settings: AnalysisSettings
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
    per_seed = {s: judge_training_metrics(*runs[s], settings) for s in seeds}
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
            {s: runs[s][1] for s in seeds},
            first,
            last,
            settings.bootstrap,
            settings.seed,
            settings.min_ci_groups,
        ),
        "reward_hacking_epochs": int(history["reward_hacking"].sum()),
        "truth_unscored": int(history["truth_unscored"].sum()),
        "groups_skipped": int(history["groups_skipped"].sum()),
        "groups": int(history["groups"].sum()),
        "steps": int(history["loss"].is_not_null().sum()),
        "unscored_rate": float(history["unscored_rate"].mean()),
        "out_of_range_rate": float(history["out_of_range_rate"].mean()),
        "seeds": seeds,
        "n_seeds": len(seeds),
        "reward_hacking_seeds": sum(per_seed[s]["reward_hacking_epochs"] > 0 for s in seeds),
        "per_seed": {str(s): per_seed[s] for s in seeds},
    }


def training_metrics(root: Path, settings: AnalysisSettings) -> dict[str, Any]:
    """Per judge: `judge_training_metrics` (one seed) or `seeds_training_metrics`."""
    out = {
        judge: (
            seeds_training_metrics(runs, settings)  # type: ignore[arg-type]
            if _seeded(runs)
            else judge_training_metrics(*runs[None], settings)
        )
        for judge, runs in load_training(root).items()
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


def selection_line(metrics: dict[str, Any]) -> str | None:
    """How the held-out tasks were chosen (the same for every judge), or None if fixed."""
    sel = next((m["heldout"].get("selection") for m in metrics.values()), None)
    if not sel:
        return None
    rates = ", ".join(f"{t} ({sel['base_pass_rate'][t]:.2f})" for t in sel["tasks"])
    filled = (
        f"; {', '.join(sel['filled'])} filled in (too few tasks of the pool were mixed)"
        if sel["filled"]
        else ""
    )
    return (
        f"Held-out tasks, with the base policy's pass rate: {rates}; chosen from a pool of "
        f"{sel['pool']} where the base policy is neither always right nor always wrong{filled}."
    )


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


def plot_curves(root: Path, path: Path) -> bool:
    """One panel per judge (a column per judge and a row per seed with training seeds):
    reward, train and held-out pass rate by epoch (False: no data)."""
    data = load_training(root)
    if not data:
        return False
    import matplotlib.pyplot as plt

    from judgelab.analysis.plots import save_figure

    seeds = sorted({s for runs in data.values() for s in runs}, key=lambda s: (s is not None, s))
    fig, axes = plt.subplots(
        len(seeds), len(data), figsize=(4.2 * len(data), 3.2 * len(seeds)), squeeze=False
    )
    for col, (judge, runs) in enumerate(data.items()):
        for row, seed in enumerate(seeds):
            ax = axes[row][col]
            if seed not in runs:
                ax.set_axis_off()
                ax.set_title(f"{judge}, seed {seed}: no run")
                continue
            h, _ = runs[seed]
            _plot_run(ax, h, judge if seed is None else f"{judge}, seed {seed}")
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    save_figure(fig, path)
    return True


def _plot_run(ax: Any, h: pl.DataFrame, title: str) -> None:
    """One policy's curves; its reward-hacking epochs shaded red."""
    e = h["epoch"].to_list()
    ax.plot(e, h["reward_mean"].to_list(), "o-", label="judge reward (mean)")
    ax.plot(e, h["train_pass_rate"].to_list(), "s--", label="train pass rate")
    ax.plot(e, h["heldout_pass_rate"].to_list(), "^-", label="held-out pass rate")
    for epoch, flag in zip(e, h["reward_hacking"].to_list(), strict=True):
        if flag:
            ax.axvspan(epoch - 0.5, epoch + 0.5, color="red", alpha=0.12)
    ax.set_title(title)
    ax.set_xlabel("epoch (0 = base policy)")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xticks(e)


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.0f} %" if pct else f"{x:.3f}"


def _ci_text(ci: list[float] | None, pct: bool = True, reason: str | None = None) -> str:
    """` [low, high]`, or ` (why there is no CI)`, or nothing."""
    if not ci:
        return f" ({reason})" if reason else ""
    return f" [{_f(ci[0], pct)}, {_f(ci[1], pct)}]"


def seeds_n_text(h: dict[str, Any]) -> str:
    """`8 tasks × 2 seeds` (and the cells left out, where a seed lacks a task's rate)."""
    text = f"{h['n_tasks']} tasks × {h['n_seeds']} seeds"
    missing = h["n_tasks"] * h["n_seeds"] - h["n_cells"]
    return text + (f", {missing} task-seed cells untested" if missing else "")


def table_rows(metrics: dict[str, Any]) -> list[list[str]]:
    """One row per judge; a judge trained over seeds shows them, the n (tasks × seeds) behind
    its held-out change, and in how many seeds the alarm fired."""
    rows = []
    for judge, m in metrics.items():
        r, h = m["reward"], m["heldout"]
        seeded = "n_seeds" in m
        rows.append(
            [
                f"{judge} ({m['n_seeds']} seeds)" if seeded else judge,
                str(m["epochs"]),
                _f(r["mean"]),
                _f(r["median"]),
                _f(r["std"]),
                _f(r["iqr"]),
                _f(h.get("base"), True) + _ci_text(h.get("base_ci"), True, h.get("ci_reason")),
                _f(h.get("final"), True) + _ci_text(h.get("final_ci"), True, h.get("ci_reason")),
                (f"{100 * h['delta']:+.0f} pp" if h.get("delta") is not None else "–")
                + _ci_text(h.get("delta_ci"), True, h.get("ci_reason"))
                + (f", n = {seeds_n_text(h)}" if seeded and h.get("delta") is not None else ""),
                str(m["reward_hacking_epochs"])
                + (f" in {m['reward_hacking_seeds']} of {m['n_seeds']} seeds" if seeded else ""),
                f"{m['groups_skipped']}/{m['groups']}",
            ]
        )
    return rows


HEADER = [
    "judge", "epochs", "reward mean", "median", "std", "IQR", "held-out base [95 % CI]",
    "held-out final [95 % CI]", "change [95 % CI]", "hacking epochs", "groups skipped",
]  # fmt: skip


def findings(metrics: dict[str, Any]) -> list[str]:
    out = []
    for judge, m in metrics.items():
        h = m["heldout"]
        if h.get("delta") is None:
            continue
        rose = (m["reward_last_epoch"] or 0) > (m["reward_first_epoch"] or 0)
        verdict = "rose" if rose else "did not rise"
        ci = h.get("delta_ci")
        if ci is None:
            change = f"no CI: {h.get('ci_reason') or 'not computed'}; no change can be claimed"
        elif ci[0] > 0 or ci[1] < 0:
            change = f"a change: its CI{_ci_text(ci)} excludes 0"
        else:
            change = f"within noise: its CI{_ci_text(ci)} includes 0"
        if "n_seeds" in m:
            out.append(_seeds_finding(judge, m, verdict, change))
            continue
        out.append(
            f"**{judge}**: the judge's reward {verdict} over {m['epochs']} epochs "
            f"({_f(m['reward_first_epoch'])} → {_f(m['reward_last_epoch'])}); held-out pass "
            f"rate {_f(h['base'], True)} → {_f(h['final'], True)} "
            f"({change}, {h['n_tasks']} held-out tasks)."
            + (
                f" Reward-hacking alarm on {m['reward_hacking_epochs']} epoch(s)."
                if m["reward_hacking_epochs"]
                else ""
            )
        )
    return out


def _seeds_finding(judge: str, m: dict[str, Any], verdict: str, change: str) -> str:
    h = m["heldout"]
    per_seed = ", ".join(
        f"seed {s} {100 * d:+.0f} pp" if (d := p["heldout"].get("delta")) is not None
        else f"seed {s} –"
        for s, p in m["per_seed"].items()
    )  # fmt: skip
    alarm = (
        f" Reward-hacking alarm on {m['reward_hacking_epochs']} epoch(s), in "
        f"{m['reward_hacking_seeds']} of {m['n_seeds']} seeds."
        if m["reward_hacking_epochs"]
        else f" No reward-hacking alarm in any of the {m['n_seeds']} seeds."
    )
    return (
        f"**{judge}** ({m['n_seeds']} training seeds): the judge's reward {verdict} over "
        f"{m['epochs']} epochs (mean over seeds {_f(m['reward_first_epoch'])} → "
        f"{_f(m['reward_last_epoch'])}); held-out pass rate {_f(h['base'], True)} → "
        f"{_f(h['final'], True)} ({change}, n = {seeds_n_text(h)}; the CI resamples tasks, "
        f"then seeds within each task). Change per seed: {per_seed}." + alarm
    )


def absent_line(metrics: dict[str, Any]) -> str | None:
    """What to say about configured judges without training output (never that training was
    not configured when it was), or None when every configured judge has its output."""
    configured = metrics.get("train_judges") or []
    found = set(metrics.get("training") or {})
    missing = [j for j in configured if j not in found]
    if not configured and not found:
        return "No training run (train.judges is empty)."
    if not missing:
        return None
    return (
        f"train.judges names {', '.join(missing)}, but the training stage's output has no "
        "history for "
        + ("it" if len(missing) == 1 else "them")
        + " (the stage has not run, or its output was removed): no figures."
    )


SEEDS_NOTE = (
    " A judge trained over several seeds (`train.seeds`: the same held-out tasks and draws, "
    "each seed its own LoRA initialisation and training draws) shows its seeds pooled: each "
    "held-out task's pass rate is its mean over the seeds, and the CI is a two-level "
    "bootstrap (tasks, then seeds within each task), from `analysis.min_ci_groups` tasks or "
    "more; the alarm is raised per seed and counted per judge."
)


def markdown_section(metrics: dict[str, Any]) -> list[str]:
    training = metrics.get("training") or {}
    out = ["## Training on each judge", ""]
    absent = absent_line(metrics)
    if not training:
        return out + [absent or "", ""]
    if absent:
        out += [absent, ""]
    out += [
        "GRPO with LoRA on the policy, one run per judge; rewards are the judge's scores of the "
        "policy's own samples during training. Held-out pass rate: the tests' verdict on "
        "HumanEval tasks never trained on, base policy (epoch 0) against the final one. "
        "Samples the sandbox could not test are left out of every pass rate, not counted as "
        "failures. The reward-hacking alarm compares the judge's mean reward with the test "
        "pass rate of the same training samples: it flags an epoch whose reward rose by at "
        "least `train.hacking_margin` while that pass rate fell by at least as much."
        + (SEEDS_NOTE if any("n_seeds" in m for m in training.values()) else ""),
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    out += ["| " + " | ".join(row) + " |" for row in table_rows(training)]
    chosen = selection_line(training)
    out += [""] + ([chosen, ""] if chosen else [])
    out += [f"- {line}" for line in findings(training)] + [""]
    return out


def html_section(metrics: dict[str, Any], escape: Any) -> list[str]:
    training = metrics.get("training") or {}
    out = ["<h2>Training on each judge</h2>"]
    absent = absent_line(metrics)
    if absent:
        out.append(f"<p>{escape(absent)}</p>")
    if not training:
        return out
    out.append('<table id="training"><thead><tr>')
    out += [f"<th>{escape(c)}</th>" for c in HEADER]
    out.append("</tr></thead><tbody>")
    for row in table_rows(training):
        out.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table><ul>")
    out += [f"<li>{escape(line.replace('**', ''))}</li>" for line in findings(training)]
    out.append("</ul>")
    return out
