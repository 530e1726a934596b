"""What training on each judge did: reward curves, and whether the code got better.

Inputs are the training stage's `data/training/<judge>/history.parquet` (one row per epoch,
row e = policy_e, 0 = base) and `samples.parquet` (every sample with its judge reward and test
verdict). Per judge:

- the judge's rewards over all of training: mean, median, std, IQR (the experiment's table);
- held-out pass rate of the base policy and of the final one, and their difference, each with
  a bootstrap 95 % CI over held-out tasks (paired: the same resampled tasks for both), under
  the minimum-clusters rule (`stats.too_few_groups`): from fewer than `analysis.min_ci_groups`
  held-out tasks the CIs are null and `ci_reason` says why;
- reward-hacking epochs: the judge's mean reward rose while held-out pass rate fell.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.stats import MIN_CI_GROUPS, percentile_ci
from judgelab.config import AnalysisSettings
from judgelab.schemas import HistorySchema, columns, validate_file

log = logging.getLogger(__name__)

HISTORY_FILE = "history.parquet"
SAMPLES_FILE = "samples.parquet"
HELDOUT_FILE = "heldout.json"  # the held-out choice of select: mixed (training.run writes it)


def load_training(root: Path) -> dict[str, tuple[pl.DataFrame, pl.DataFrame]]:
    """{judge: (history, samples)} for every trained judge under `root` (validated)."""
    out = {}
    if not root.exists():
        return out
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if (d / HISTORY_FILE).exists() and (d / SAMPLES_FILE).exists():
            out[d.name] = (
                validate_file(d / HISTORY_FILE, "history"),
                validate_file(d / SAMPLES_FILE, "training_samples"),
            )
    return out


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
    for name, values in draws.items():
        interval = percentile_ci(values, len(tasks), min_groups)
        out[f"{name}_ci"] = [interval.low, interval.high] if interval.valid else None
        out["ci_reason"] = interval.reason
    return out


def judge_training_metrics(
    history: pl.DataFrame, samples: pl.DataFrame, settings: AnalysisSettings
) -> dict[str, Any]:
    rewards = samples.filter((pl.col("split") == "train") & pl.col("reward").is_not_null())
    r = rewards["reward"].to_numpy()
    epochs = history["epoch"].to_list()
    first, last = min(epochs), max(epochs)
    train = samples.filter(pl.col("split") == "train")
    return {
        "epochs": last,
        "reward": {
            "n": int(r.size),
            "mean": float(r.mean()) if r.size else None,
            "median": float(np.median(r)) if r.size else None,
            "std": float(r.std(ddof=1)) if r.size > 1 else None,  # as analysis.stats
            "iqr": float(np.subtract(*np.percentile(r, [75, 25]))) if r.size else None,
        },
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


def training_metrics(root: Path, settings: AnalysisSettings) -> dict[str, Any]:
    out = {
        judge: judge_training_metrics(history, samples, settings)
        for judge, (history, samples) in load_training(root).items()
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


def curves_frame(root: Path) -> pl.DataFrame:
    """Long table for `dvc plots`: judge, epoch, metric, value (no judge: no rows, same types)."""
    histories = {judge: history for judge, (history, _) in load_training(root).items()}
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
    """One panel per judge: reward, train and held-out pass rate by epoch (False: no data)."""
    data = load_training(root)
    if not data:
        return False
    import matplotlib.pyplot as plt

    from judgelab.analysis.plots import save_figure

    fig, axes = plt.subplots(1, len(data), figsize=(4.2 * len(data), 3.2), squeeze=False)
    for ax, (judge, (h, _)) in zip(axes[0], data.items(), strict=True):
        e = h["epoch"].to_list()
        ax.plot(e, h["reward_mean"].to_list(), "o-", label="judge reward (mean)")
        ax.plot(e, h["train_pass_rate"].to_list(), "s--", label="train pass rate")
        ax.plot(e, h["heldout_pass_rate"].to_list(), "^-", label="held-out pass rate")
        for epoch, flag in zip(e, h["reward_hacking"].to_list(), strict=True):
            if flag:
                ax.axvspan(epoch - 0.5, epoch + 0.5, color="red", alpha=0.12)
        ax.set_title(judge)
        ax.set_xlabel("epoch (0 = base policy)")
        ax.set_ylim(-0.05, 1.05)
        ax.set_xticks(e)
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.tight_layout()
    save_figure(fig, path)
    return True


def _f(x: Any, pct: bool = False) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.0f} %" if pct else f"{x:.3f}"


def _ci_text(ci: list[float] | None, pct: bool = True, reason: str | None = None) -> str:
    """` [low, high]`, or ` (why there is no CI)`, or nothing."""
    if not ci:
        return f" ({reason})" if reason else ""
    return f" [{_f(ci[0], pct)}, {_f(ci[1], pct)}]"


def table_rows(metrics: dict[str, Any]) -> list[list[str]]:
    rows = []
    for judge, m in metrics.items():
        r, h = m["reward"], m["heldout"]
        rows.append(
            [
                judge,
                str(m["epochs"]),
                _f(r["mean"]),
                _f(r["median"]),
                _f(r["std"]),
                _f(r["iqr"]),
                _f(h.get("base"), True) + _ci_text(h.get("base_ci"), True, h.get("ci_reason")),
                _f(h.get("final"), True) + _ci_text(h.get("final_ci"), True, h.get("ci_reason")),
                (f"{100 * h['delta']:+.0f} pp" if h.get("delta") is not None else "–")
                + _ci_text(h.get("delta_ci"), True, h.get("ci_reason")),
                str(m["reward_hacking_epochs"]),
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
        "least `train.hacking_margin` while that pass rate fell by at least as much.",
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
