"""An epoch row's counts, gathered group by group from a scored round (`Tally`), the
per-sample records of `samples.parquet`, and the reward summary of a row (`reward_stats`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median, stdev

from judgelab.advantage import group_advantages, has_spread
from judgelab.training.alignment import GroupAlignment, group_alignment
from judgelab.training.policy import Sample
from judgelab.training.round import GroupScores
from judgelab.verdicts import Candidate


def _sample_record(
    judge: str,
    epoch: int,
    split: str,
    c: Candidate,
    s: Sample,
    reward: dict | None,
    passed: float | None,
    draw_seed: int,
    group: int | None = None,
) -> dict:
    """`passed` is None when the sandbox could not run the tests (an unscored verdict);
    `draw_seed`: the seed the sample was drawn with; `group`: a training group's index
    within its epoch (None: held-out)."""
    return {
        "judge": judge,
        "epoch": epoch,
        "split": split,
        "task_id": c.task_id,
        "candidate_id": c.candidate_id,
        "sample_index": c.sample_index,
        "reward": reward["score"] if reward else None,
        "status": reward["status"] if reward else None,
        "passed": passed,
        "completion_tokens": len(s.token_ids),
        "finish_reason": s.finish_reason,
        "group": group,
        "draw_seed": draw_seed,
    }


def _forged(verdict: dict) -> bool:
    """The tests' verdict (a scores row) says the code faked a pass."""
    return verdict["outcome"] == "forged"


def _quantile(values: Sequence[float], q: float) -> float:
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def reward_stats(rewards: Sequence[float]) -> dict[str, float | None]:
    if not rewards:
        return {"reward_mean": None, "reward_median": None, "reward_std": None, "reward_iqr": None}
    mean = sum(rewards) / len(rewards)
    # the report's one definition (analysis.stats.describe): sample std, ddof = 1
    std = stdev(rewards) if len(rewards) > 1 else None
    iqr = _quantile(rewards, 0.75) - _quantile(rewards, 0.25)
    return {
        "reward_mean": mean,
        "reward_median": float(median(rewards)),
        "reward_std": std,
        "reward_iqr": iqr,
    }


@dataclass
class Tally:
    """An epoch row's counts, gathered group by group (`Trainer.epoch_row`)."""

    rewards: list[float] = field(default_factory=list)  # the judge's scored rewards
    passes: list[float] = field(default_factory=list)  # training samples' test verdicts
    heldout: list[float] = field(default_factory=list)  # held-out samples' test verdicts
    records: list[dict] = field(default_factory=list)
    aligned: list[GroupAlignment] = field(default_factory=list)  # the groups GRPO can step on
    skipped: int = 0
    unscored: int = 0
    out_of_range: int = 0
    samples: int = 0
    tokens: int = 0
    truth_unscored: int = 0
    forged: int = 0

    def add_train(self, judge: str, epoch: int, g: int, group: GroupScores) -> None:
        assert group.judged is not None
        rows, truth = group.judged.rows, group.tests.rows
        # a sandbox error is no verdict on the code: neither a pass nor a failure
        self.passes += [v["score"] for v in truth if v["score"] is not None]
        self.truth_unscored += sum(v["score"] is None for v in truth)
        self.forged += sum(_forged(v) for v in truth)
        self.records += [
            _sample_record(
                judge,
                epoch,
                "train",
                c,
                smp,
                r,
                v["score"],
                group.request.seeds[c.sample_index],
                g,
            )  # fmt: skip
            for c, smp, r, v in zip(group.candidates, group.samples, rows, truth, strict=True)
        ]
        self.samples += len(group.samples)
        self.tokens += sum(len(smp.token_ids) for smp in group.samples)
        self.unscored += sum(r["status"] != "scored" for r in rows)
        self.out_of_range += sum(bool(r["out_of_range"]) for r in rows)
        group_rewards = [r["score"] for r in rows if r["status"] == "scored"]
        self.rewards += group_rewards
        if not has_spread(group_rewards):
            self.skipped += 1
        else:  # a group GRPO steps on: where do its advantages push, by the tests?
            tested = [v["score"] for r, v in zip(rows, truth, strict=True)
                      if r["status"] == "scored"]  # fmt: skip
            self.aligned.append(group_alignment(group_advantages(group_rewards), tested))

    def add_heldout(self, judge: str, epoch: int, group: GroupScores) -> None:
        self.forged += sum(_forged(v) for v in group.tests.rows)
        for c, smp, verdict in zip(group.candidates, group.samples, group.tests.rows, strict=True):
            passed = verdict["score"]
            if passed is None:
                self.truth_unscored += 1
            else:
                self.heldout.append(passed)
            seed = group.request.seeds[c.sample_index]
            self.records.append(_sample_record(judge, epoch, "heldout", c, smp, None, passed, seed))
