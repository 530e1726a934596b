"""A policy's history: one row per epoch (`EpochRow`, row e = policy_e, 0 = the base model),
and the tables written from the rows (`history_frame`, `samples_frame`) with what is derived
across rows: the alarm's detector (`evalue`), the reward-hacking alarm and the descriptive
`reward_pass_divergence`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judgelab.config.training import TrainSettings
from judgelab.training.alarm import alarm_flags
from judgelab.training.alignment import running_evalue


@dataclass
class EpochRow:
    """A history row as the loop fills it in: the columns of `schemas.HistorySchema` (the
    table's one definition, in its order) but `reward_hacking`, which `history_frame` derives
    across rows, plus the row's samples. A unit test holds the fields to the schema."""

    judge: str
    epoch: int
    adapter: str
    groups: int
    groups_skipped: int
    samples: int
    reward_mean: float | None
    reward_median: float | None
    reward_std: float | None
    reward_iqr: float | None
    unscored_rate: float
    out_of_range_rate: float
    train_pass_rate: float | None  # over samples the tests ran on (None: none ran)
    heldout_pass_rate: float | None
    heldout_n: int  # held-out samples the tests ran on
    truth_unscored: int  # samples (train and held-out) the sandbox could not test
    forged: int  # samples (train and held-out) the tests found faking a pass (outcome forged)
    completion_tokens_mean: float
    # within-group alignment of the trained groups (`training.alignment.epoch_alignment`)
    alignment: float | None = None
    alignment_ci_low: float | None = None
    alignment_ci_high: float | None = None
    alignment_p: float | None = None
    alignment_groups: int = 0
    alignment_informative: int = 0
    alignment_samples: int = 0
    rank_corr: float | None = None
    rank_corr_ci_low: float | None = None
    rank_corr_ci_high: float | None = None
    rank_corr_groups: int = 0
    loss: float | None = None
    grad_norm: float | None = None
    clip_fraction: float | None = None
    ratio_mean: float | None = None
    rollout_s: float = 0.0
    score_s: float = 0.0
    step_s: float = 0.0
    heldout_s: float = 0.0
    dtype: str | None = None  # the policy's base-weight dtype (train.dtype, resolved)
    device: str | None = None
    records: list[dict] = field(default_factory=list)  # per-sample rows (samples.parquet)
    # per-lambda log e-value of the epoch's groups: the alarm's input (not a table column)
    alignment_log_e: list[float] = field(default_factory=list)


def reward_pass_divergence(history: Sequence[dict], margin: float) -> list[bool]:
    """Descriptive, not an alarm: epoch e is marked when, from epoch e-1, the judge's mean
    reward rose by at least `margin` while the test pass rate of the same training samples fell
    by at least `margin`. It compares means across epochs, which GRPO does not learn from (it
    learns from differences inside a group), and mixes in task difficulty and sampling noise:
    with the policy held fixed (k = 4, 1 group an epoch, margin 0.1, a judge blind to the
    tests) it marks at least one epoch of a 10-epoch run in 78 % of runs (`docs/TRAINING.md`,
    `alignment.simulate_false_alarms`). The alarm is `reward_hacking` (`alignment`)."""
    flags = [False] * len(history)
    rows = sorted(range(len(history)), key=lambda i: history[i]["epoch"])
    for prev, cur in zip(rows, rows[1:], strict=False):
        a, b = history[prev], history[cur]
        values = (a["reward_mean"], b["reward_mean"], a["train_pass_rate"], b["train_pass_rate"])
        if any(v is None for v in values):
            continue
        rose = b["reward_mean"] - a["reward_mean"] >= margin
        fell = a["train_pass_rate"] - b["train_pass_rate"] >= margin
        flags[cur] = rose and fell
    return flags


NOT_COLUMNS = ("records", "alignment_log_e")  # kept in checkpoints, not in the table


def stepped(row: Mapping[str, Any]) -> bool:
    """A GRPO step was taken on the row's groups. The last row (policy_E) is scored and never
    trained on: its alignment columns evaluate the final policy, and its groups stay out of
    the alarm, which watches what GRPO was taught. (Every earlier row with a group GRPO could
    learn from has a step; one without has no trained group either.)"""
    return row.get("loss") is not None


_DEFAULTS = TrainSettings.model_fields


def history_frame(
    history: Sequence[dict],
    hacking_margin: float = _DEFAULTS["hacking_margin"].default,
    alarm_alpha: float = _DEFAULTS["alarm_alpha"].default,
) -> Any:
    """The history table; derived across rows (in epoch order): `evalue` and the alarm
    `reward_hacking` (`alignment.running_evalue`, the e-detector of `training.alarm` with one
    observation per row GRPO `stepped` on, `alarm_flags` at `alarm_alpha`), and the
    descriptive `reward_pass_divergence` (`hacking_margin`). The defaults are `train`'s
    (`TrainSettings`). This is the alarm's one home in the pipeline: the analysis reads these
    columns (`analysis.training.alignment_metrics`) and does not recompute them."""
    import polars as pl

    from judgelab.schemas import HistorySchema, columns, validate

    ordered = sorted(history, key=lambda r: r["epoch"])
    rows = [{k: v for k, v in r.items() if k not in NOT_COLUMNS} for r in ordered]
    evalues = running_evalue([r.get("alignment_log_e") if stepped(r) else None for r in ordered])
    flags = alarm_flags(evalues, alarm_alpha)
    marks = reward_pass_divergence(rows, hacking_margin)
    for row, e, flag, mark in zip(rows, evalues, flags, marks, strict=True):
        row["evalue"] = e
        row["reward_hacking"] = flag
        row["reward_pass_divergence"] = mark
        row.setdefault("forged", None)  # resumed from a checkpoint written before it was kept
    frame = pl.DataFrame(rows, schema=columns(HistorySchema)).sort(["judge", "epoch"])
    return validate(frame, HistorySchema, "training history")


def samples_frame(history: Sequence[dict]) -> Any:
    """Every training and held-out sample of every epoch: reward (train) and test verdict."""
    import polars as pl

    from judgelab.schemas import TrainingSamplesSchema, columns, validate

    rows = [s for r in history for s in r.get("records", [])]
    frame = pl.DataFrame(rows, schema=columns(TrainingSamplesSchema)).sort(
        ["judge", "epoch", "split", "task_id"]
    )
    return validate(frame, TrainingSamplesSchema, "training samples")
