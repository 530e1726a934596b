"""The epoch loop: one LoRA policy per judge, trained with GRPO on that judge's rewards.

Row e of a judge's history describes policy_e (policy_0 is the base model): the judge's
rewards on groups sampled from it, the pass rate of those same samples under the tests
(train pass rate), and its held-out pass rate on HumanEval tasks it never trains on. Rows
0..E-1 also carry the GRPO step that turned policy_e into policy_{e+1}; row E has none.

After every row a checkpoint `step-NNN` (NNN = optimiser steps taken) holds the adapter,
the optimiser state and the history so far, written atomically. A rerun resumes from the
newest checkpoint: no epoch is lost or repeated. Samples are cached by the adapter's content
hash, held-out results too, so the base round (identical for every judge) runs once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from judgelab.cache import JsonCache, digest
from judgelab.config import ExecutionEvaluator, RolloutSettings, TrainSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import Candidate, Task, Verdict
from judgelab.io import atomic_dir
from judgelab.rollouts.generate import policy_messages, sample_seed
from judgelab.scoring import score_group
from judgelab.training.grpo import StepStats, Trajectory, group_advantages, grpo_step, has_spread
from judgelab.training.policy import Policy, Sample

log = logging.getLogger(__name__)

HISTORY_COLUMNS = (
    "judge", "epoch", "adapter", "groups", "groups_skipped", "samples",
    "reward_mean", "reward_median", "reward_std", "reward_iqr",
    "unscored_rate", "out_of_range_rate", "train_pass_rate",
    "heldout_pass_rate", "heldout_n", "completion_tokens_mean",
    "loss", "grad_norm", "clip_fraction", "ratio_mean",
    "rollout_s", "score_s", "step_s", "heldout_s",
)  # fmt: skip


@dataclass
class EpochRow:
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
    train_pass_rate: float | None
    heldout_pass_rate: float
    heldout_n: int
    completion_tokens_mean: float
    loss: float | None = None
    grad_norm: float | None = None
    clip_fraction: float | None = None
    ratio_mean: float | None = None
    rollout_s: float = 0.0
    score_s: float = 0.0
    step_s: float = 0.0
    heldout_s: float = 0.0
    records: list[dict] = field(default_factory=list)  # per-sample rows (samples.parquet)


def _sample_record(
    judge: str, epoch: int, split: str, c: Candidate, s: Sample, reward: dict | None, passed: float
) -> dict:
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
    }


def _quantile(values: Sequence[float], q: float) -> float:
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def reward_stats(rewards: Sequence[float]) -> dict[str, float | None]:
    if not rewards:
        return {"reward_mean": None, "reward_median": None, "reward_std": None, "reward_iqr": None}
    mean = sum(rewards) / len(rewards)
    std = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
    iqr = _quantile(rewards, 0.75) - _quantile(rewards, 0.25)
    return {
        "reward_mean": mean,
        "reward_median": float(median(rewards)),
        "reward_std": std,
        "reward_iqr": iqr,
    }


def training_tasks(tasks: Sequence[Task]) -> list[Task]:
    """Tasks with tests: every judge trains on them, so the train pass rate is measurable."""
    kept = [t for t in tasks if t.test]
    if not kept:
        raise ConfigError(
            "train: no task with tests to train on; enable tasks.humaneval (limit >= 1)"
        )
    return kept


def check_disjoint(train: Sequence[Task], heldout: Sequence[Task]) -> None:
    overlap = sorted({t.task_id for t in train} & {t.task_id for t in heldout})
    if overlap:
        raise ConfigError(
            f"train.heldout: tasks {overlap} are also training tasks; move "
            "train.heldout.offset past tasks.humaneval"
        )


@dataclass(frozen=True)
class Request:
    messages: list[dict]
    n: int
    temperature: float
    max_tokens: int


class Sampler:
    """One batched decode per round, cached by (adapter hash, prompts, sampling settings)."""

    def __init__(self, policy: Policy, cache: JsonCache) -> None:
        self.policy = policy
        self.cache = cache

    def round(self, requests: Sequence[Request], seed: int) -> list[list[Sample]]:
        prompts = [self.policy.prompt_ids(r.messages) for r in requests]
        key = {
            "policy": self.policy.zoo_name,
            "adapter": self.policy.adapter_hash(),
            "prompts": prompts,
            "sampling": [(r.n, r.temperature, r.max_tokens) for r in requests],
            "seed": seed,
        }
        flat = self.cache.get(key)
        if flat is None:
            rows = [(p, r) for p, r in zip(prompts, requests, strict=True) for _ in range(r.n)]
            samples = self.policy.sample(
                [p for p, _ in rows],
                temperatures=[r.temperature for _, r in rows],
                max_new_tokens=[r.max_tokens for _, r in rows],
                seed=seed,
            )
            flat = [asdict(x) for x in samples]
            self.cache.put(key, flat)
        groups, i = [], 0
        for r in requests:
            groups.append([Sample(**x) for x in flat[i : i + r.n]])
            i += r.n
        return groups


def candidates(task: Task, messages: list[dict], samples: Sequence[Sample], tag: str) -> list:
    return [
        Candidate(
            task_id=task.task_id,
            candidate_id=digest({"tag": tag, "i": i, "ids": s.token_ids})[:16],
            sample_index=i,
            completion=s.text,
            messages=messages,
        )
        for i, s in enumerate(samples)
    ]


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    steps: int
    history: list[dict]
    done: bool


def latest_checkpoint(root: Path) -> Checkpoint | None:
    best = None
    for d in sorted(root.glob("step-*")):
        state = d / "state.json"
        if not state.exists():  # an interrupted write never gets here (atomic), but be sure
            continue
        body = json.loads(state.read_text())
        best = Checkpoint(d, body["steps"], body["history"], body["done"])
    return best


class Trainer:
    """Trains one judge's policy for `settings.epochs` epochs, resumably."""

    def __init__(
        self,
        judge_name: str,
        judge: Any,
        spec: Any,
        settings: TrainSettings,
        rollout: RolloutSettings,
        tasks: Sequence[Task],
        heldout: Sequence[Task],
        out_dir: Path,
        cache: JsonCache,
        executor: Any,
        policy_factory: Callable[[Path | None], Policy],
    ) -> None:
        self.judge_name = judge_name
        self.judge = judge
        self.spec = spec
        self.settings = settings
        self.rollout = rollout
        self.tasks = training_tasks(tasks)
        self.heldout = list(heldout)
        check_disjoint(self.tasks, self.heldout)
        self.out_dir = out_dir
        self.cache = cache
        self.executor = executor
        self.policy_factory = policy_factory

    def _tasks_for(self, epoch: int) -> list[Task]:
        n = self.settings.groups_per_epoch
        return [self.tasks[(epoch * n + g) % len(self.tasks)] for g in range(n)]

    def run(self, on_epoch: Callable[[dict], None] | None = None) -> list[dict]:
        """Train to `settings.epochs` (resuming if a checkpoint exists); `on_epoch(row)` is
        called after each epoch's checkpoint is written (progress display)."""
        import torch

        ckpt_root = self.out_dir / "checkpoints"
        ckpt = latest_checkpoint(ckpt_root)
        if ckpt is not None and ckpt.done:
            log.info("%s: training already complete (%d steps)", self.judge_name, ckpt.steps)
            return ckpt.history
        torch.manual_seed(self.settings.seed)  # the same initial adapter for every judge
        policy = self.policy_factory(ckpt.path if ckpt else None)
        optimizer = torch.optim.AdamW(
            policy.trainable(), lr=self.settings.learning_rate, weight_decay=0.0
        )
        history: list[dict] = []
        start = 0
        if ckpt is not None:
            optimizer.load_state_dict(torch.load(ckpt.path / "optimizer.pt", weights_only=True))
            history, start = list(ckpt.history), ckpt.steps
            log.info("%s: resuming at epoch %d", self.judge_name, start)
        sampler = Sampler(policy, self.cache)
        for epoch in range(start, self.settings.epochs + 1):
            row, trajectories = self._evaluate(epoch, policy, sampler)
            if epoch < self.settings.epochs:
                t0 = time.monotonic()
                stats = (
                    grpo_step(
                        policy, optimizer, trajectories, self.settings.loss,
                        self.settings.max_grad_norm,
                    )
                    if trajectories
                    else None
                )  # fmt: skip
                row.step_s = time.monotonic() - t0
                if stats is not None:
                    self._record_step(row, stats)
            history.append(asdict(row))
            self._save(ckpt_root, epoch, policy, optimizer, history)
            if on_epoch is not None:
                on_epoch(history[-1])
            log.info(
                "%s epoch %d/%d: reward %s, held-out pass %.2f, %s",
                self.judge_name, epoch, self.settings.epochs,
                "n/a" if row.reward_mean is None else f"{row.reward_mean:.3f}",
                row.heldout_pass_rate,
                "no step" if row.loss is None else f"loss {row.loss:.4f}",
            )  # fmt: skip
        return history

    @staticmethod
    def _record_step(row: EpochRow, stats: StepStats) -> None:
        row.loss = stats.loss
        row.grad_norm = stats.grad_norm
        row.clip_fraction = stats.clip_fraction
        row.ratio_mean = stats.ratio_mean

    def _evaluate(
        self, epoch: int, policy: Policy, sampler: Sampler
    ) -> tuple[EpochRow, list[Trajectory]]:
        train, held = self.settings, self.settings.heldout
        adapter = policy.adapter_hash()
        tasks = self._tasks_for(epoch)
        msgs = lambda t: policy_messages(self.rollout, t)  # noqa: E731
        requests = [
            Request(msgs(t), train.k, train.temperature, train.max_tokens) for t in tasks
        ] + [
            Request(msgs(t), held.samples, held.temperature, held.max_tokens) for t in self.heldout
        ]
        t0 = time.monotonic()
        groups = sampler.round(requests, seed=sample_seed(train.seed, "train-round", epoch))
        rollout_s = time.monotonic() - t0
        rewards: list[float] = []
        passes: list[float] = []
        trajectories: list[Trajectory] = []
        skipped = unscored = out_of_range = n_samples = tokens = 0
        score_s = 0.0
        records: list[dict] = []
        for g, (task, req, samples) in enumerate(zip(tasks, requests, groups, strict=False)):
            cands = candidates(task, req.messages, samples, f"train|{adapter}|{epoch}")
            t0 = time.monotonic()
            rows = score_group(
                f"train-{self.judge_name}", self.judge, self.spec, task, cands, repeat=0
            )
            score_s += time.monotonic() - t0
            truth: list[Verdict] = [self.executor.score(task, c) for c in cands]
            passes += [v.score or 0.0 for v in truth]
            records += [
                _sample_record(self.judge_name, epoch, "train", c, s, r, v.score or 0.0)
                for c, s, r, v in zip(cands, samples, rows, truth, strict=True)
            ]
            n_samples += len(samples)
            tokens += sum(len(s.token_ids) for s in samples)
            scored = [(s, r["score"]) for s, r in zip(samples, rows, strict=True)
                      if r["status"] == "scored"]  # fmt: skip
            unscored += sum(r["status"] != "scored" for r in rows)
            out_of_range += sum(bool(r["out_of_range"]) for r in rows)
            group_rewards = [r for _, r in scored]
            rewards += group_rewards
            if not has_spread(group_rewards):
                skipped += 1
                continue
            prompt = policy.prompt_ids(req.messages)
            for (s, _), adv in zip(scored, group_advantages(group_rewards), strict=True):
                if adv != 0.0:  # ART drops zero-advantage trajectories
                    trajectories.append(Trajectory(prompt, s.token_ids, s.logprobs, adv, g))
        t0 = time.monotonic()
        held_scores = []
        for task, req, samples in zip(
            self.heldout, requests[len(tasks) :], groups[len(tasks) :], strict=True
        ):
            cands = candidates(task, req.messages, samples, "heldout")
            for c, smp in zip(cands, samples, strict=True):
                passed = self.executor.score(task, c).score or 0.0
                held_scores.append(passed)
                records.append(
                    _sample_record(self.judge_name, epoch, "heldout", c, smp, None, passed)
                )
        heldout_s = time.monotonic() - t0
        row = EpochRow(
            judge=self.judge_name,
            epoch=epoch,
            adapter=adapter,
            groups=len(tasks),
            groups_skipped=skipped,
            samples=n_samples,
            **reward_stats(rewards),
            unscored_rate=unscored / max(n_samples, 1),
            out_of_range_rate=out_of_range / max(n_samples, 1),
            train_pass_rate=sum(passes) / len(passes) if passes else None,
            heldout_pass_rate=sum(held_scores) / len(held_scores),
            heldout_n=len(held_scores),
            completion_tokens_mean=tokens / max(n_samples, 1),
            rollout_s=rollout_s,
            score_s=score_s,
            heldout_s=heldout_s,
            records=records,
        )
        return row, trajectories

    def _save(
        self, root: Path, epoch: int, policy: Policy, optimizer: Any, history: list[dict]
    ) -> None:
        import torch

        steps = min(epoch + 1, self.settings.epochs)
        done = epoch == self.settings.epochs
        with atomic_dir(root / f"step-{steps:03d}") as tmp:
            policy.model.save_pretrained(tmp)
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
            state = {"steps": steps, "done": done, "history": history}
            (tmp / "state.json").write_text(json.dumps(state, indent=1))


def default_executor_spec(evaluators: Sequence[Any]) -> ExecutionEvaluator:
    for ev in evaluators:
        if isinstance(ev, ExecutionEvaluator):
            return ev
    return ExecutionEvaluator(name="execution")


def reward_hacking_flags(history: Sequence[dict]) -> list[bool]:
    """Epoch e is flagged when the judge's mean reward rose from e-1 while held-out fell."""
    flags = [False] * len(history)
    rows = sorted(range(len(history)), key=lambda i: history[i]["epoch"])
    for prev, cur in zip(rows, rows[1:], strict=False):
        a, b = history[prev], history[cur]
        if a["reward_mean"] is None or b["reward_mean"] is None:
            continue
        rose = b["reward_mean"] > a["reward_mean"] + 1e-9
        fell = b["heldout_pass_rate"] < a["heldout_pass_rate"] - 1e-9
        flags[cur] = rose and fell
    return flags


def history_frame(history: Sequence[dict]) -> Any:
    import polars as pl

    from judgelab.schemas import HistorySchema, validate

    rows = [{k: v for k, v in r.items() if k != "records"} for r in history]
    for row, flag in zip(rows, reward_hacking_flags(rows), strict=True):
        row["reward_hacking"] = flag
    schema = {c: pl.Float64 for c in HISTORY_COLUMNS}
    schema.update(
        judge=pl.Utf8, adapter=pl.Utf8, epoch=pl.Int64, groups=pl.Int64,
        groups_skipped=pl.Int64, samples=pl.Int64, heldout_n=pl.Int64,
    )  # fmt: skip
    schema["reward_hacking"] = pl.Boolean
    frame = pl.DataFrame(rows, schema=schema).sort(["judge", "epoch"])
    return validate(frame, HistorySchema, "training history")


SAMPLE_COLUMNS = {
    "judge": "Utf8", "epoch": "Int64", "split": "Utf8", "task_id": "Utf8",
    "candidate_id": "Utf8", "sample_index": "Int64", "reward": "Float64", "status": "Utf8",
    "passed": "Float64", "completion_tokens": "Int64", "finish_reason": "Utf8",
}  # fmt: skip


def samples_frame(history: Sequence[dict]) -> Any:
    """Every training and held-out sample of every epoch: reward (train) and test verdict."""
    import polars as pl

    from judgelab.schemas import TrainingSamplesSchema, validate

    rows = [s for r in history for s in r.get("records", [])]
    schema = {k: getattr(pl, v) for k, v in SAMPLE_COLUMNS.items()}
    frame = pl.DataFrame(rows, schema=schema).sort(["judge", "epoch", "split", "task_id"])
    return validate(frame, TrainingSamplesSchema, "training samples")
