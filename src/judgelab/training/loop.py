"""The epoch loop: one LoRA policy per judge, trained with GRPO on that judge's rewards.

Row e of a judge's history describes policy_e (policy_0 is the base model): the judge's
rewards on groups sampled from it, the pass rate of those same samples under the tests
(train pass rate), and its held-out pass rate on tasks it never trains on. Rows
0..E-1 also carry the GRPO step that turned policy_e into policy_{e+1}; row E has none.

All judges train in lockstep on one base model, one LoRA adapter each: an epoch's rollouts
for every judge come from one batched decode, and all of the epoch's calls (each judge on its
training groups, the tests on every training and held-out group) go to one `Scorer` at once,
which may make them concurrently (the training flow's fans them out); each result is used by
its call's place, so no row depends on the concurrency. With several training seeds
(`train.seeds`) each (judge, seed) is one more policy in the lockstep: its own adapter,
initialised from its seed, and its own training draws; the held-out tasks and draws are the
same for every seed. After every row a policy's checkpoint `step-NNN` (NNN = optimiser steps
taken) holds its adapter, optimiser state and history so far, written atomically. A rerun
resumes each policy from its newest checkpoint: no epoch is lost or repeated. Samples are
cached per row by the adapter's content hash, so the base round (identical for every judge of
a seed) is drawn once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path
from statistics import median, stdev
from typing import Any

from judgelab.cache import JsonCache, digest
from judgelab.config import RolloutSettings, TrainSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import Evaluator
from judgelab.io import atomic_dir, write_json
from judgelab.rollouts.generate import policy_messages, sample_seed
from judgelab.scoring import GroupCall, ScoredGroup, Scorer, score_serially
from judgelab.training.alignment import (
    GroupAlignment,
    alarm_flags,
    epoch_alignment,
    group_alignment,
    running_evalue,
)
from judgelab.training.grpo import StepStats, Trajectory, group_advantages, grpo_step, has_spread
from judgelab.training.policy import Policy, Sample
from judgelab.verdicts import Candidate, Task

log = logging.getLogger(__name__)

TESTS_RUN = "train-tests"  # the run id of the tests' calls (their rows' run_id is not kept)


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


def _sample_record(
    judge: str,
    epoch: int,
    split: str,
    c: Candidate,
    s: Sample,
    reward: dict | None,
    passed: float | None,
    group: int | None = None,
) -> dict:
    """`passed` is None when the sandbox could not run the tests (an unscored verdict);
    `group`: a training group's index within its epoch (None: held-out)."""
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
    }


def _forged(verdict: dict) -> bool:
    """The tests' verdict (a scores row) says the code faked a pass."""
    return verdict["outcome"] == "forged"


def _row_summary(row: EpochRow) -> str:
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    untested = f", {row.truth_unscored} untested (sandbox error)" if row.truth_unscored else ""
    forged = f", {row.forged} forged" if row.forged else ""
    return (
        f"reward {fmt(row.reward_mean)}, train pass {fmt(row.train_pass_rate)}, "
        f"held-out pass {fmt(row.heldout_pass_rate)} (n={row.heldout_n}){untested}{forged}, "
        f"within-group alignment {fmt(row.alignment)} (n={row.alignment_groups} groups)"
    )


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


def training_tasks(tasks: Sequence[Task]) -> list[Task]:
    """Tasks with tests: every judge trains on them, so the train pass rate is measurable."""
    kept = [t for t in tasks if t.test]
    if not kept:
        raise ConfigError(
            "train: no task with tests to train on; enable a task source with tests "
            "(tasks.humaneval, tasks.codeio or tasks.files)"
        )
    return kept


def select_heldout(
    rates: Mapping[str, float | None], order: Sequence[str], limit: int
) -> tuple[list[str], list[str]]:
    """The held-out rule of `select: mixed`: the first `limit` task ids in `order` whose base
    pass rate is strictly between 0 and 1; if fewer qualify, filled up with the others
    closest to 0.5 (earlier first on ties). Returns (held-out ids in `order`, fill-ins).
    Every task in `order` has a known rate; `rates` may hold others as None (untested)."""
    mixed = [t for t in order if 0.0 < rates[t] < 1.0][:limit]
    rest = sorted((t for t in order if t not in mixed), key=lambda t: abs(rates[t] - 0.5))
    filled = rest[: limit - len(mixed)]
    chosen = set(mixed) | set(filled)
    return [t for t in order if t in chosen], filled


def epoch_tasks(tasks: Sequence[Task], epoch: int, groups_per_epoch: int) -> list[Task]:
    """The tasks of epoch `epoch`'s training groups: the training tasks in order, cycled."""
    n = groups_per_epoch
    return [tasks[(epoch * n + g) % len(tasks)] for g in range(n)]


def trained_tasks(tasks: Sequence[Task], epochs: int, groups_per_epoch: int) -> list[Task]:
    """Every task a training group draws from in epochs 0..`epochs` (the last one scores the
    final policy), in first-use order. An audit of every problem trains on a few of them."""
    seen: dict[str, Task] = {}
    for epoch in range(epochs + 1):
        for t in epoch_tasks(tasks, epoch, groups_per_epoch):
            seen.setdefault(t.task_id, t)
    return list(seen.values())


def check_disjoint(train: Sequence[Task], heldout: Sequence[Task]) -> None:
    """Held-out tasks are never trained on: none of `heldout` is in `train`
    (`trained_tasks`); tasks of the table that no group draws from may be held out."""
    overlap = sorted({t.task_id for t in train} & {t.task_id for t in heldout})
    if overlap:
        raise ConfigError(
            f"train.heldout: tasks {overlap} are also trained on (train.epochs and "
            "train.groups_per_epoch cycle through the tasks table's tasks with tests); "
            "hold out others (train.heldout.offset or train.heldout.ids)"
        )


def train_row(epoch: int, group: int, n_tasks: int, task_id: str) -> str:
    """The seed row of training group `group` of `epoch`. When `groups_per_epoch` exceeds the
    number of training tasks, the tasks are cycled: the r-th repeat (r = group // n_tasks >= 1)
    of a task within one epoch gets its own row, so it draws fresh samples and is a group of
    its own, not the first round's request again (served from the cache, it would add no
    signal). The first round's row carries no repeat tag, so a run with groups_per_epoch <=
    the task count has no repeat rows at all."""
    repeat = group // n_tasks
    row = f"train|{epoch}|{task_id}"
    return row if repeat == 0 else f"{row}|repeat-{repeat}"


@dataclass(frozen=True)
class Request:
    """`len(seeds)` completions of one prompt from one adapter (a judge's policy)."""

    adapter: str
    messages: list[dict]
    seeds: tuple[int, ...]
    temperature: float
    max_tokens: int


class Sampler:
    """One batched decode per round over every judge's requests, cached per row by the
    adapter's content hash, the prompt, the sampling settings and the row's seed. A row that
    is already cached is not drawn again: the base policy's round is drawn once for all
    judges, and a crashed run's last round is reused when it resumes."""

    VERSION = 3  # of the sampling procedure: rows drawn by another version are not reused
    # (3: log-probabilities at the sampling temperature)

    def __init__(self, policy: Policy, cache: JsonCache) -> None:
        self.policy = policy
        self.cache = cache

    def round(self, requests: Sequence[Request], hashes: Mapping[str, str]) -> list[list[Sample]]:
        """Each request's samples, in order; `hashes` maps adapter names to content hashes."""
        rows: list[tuple[int, str]] = []  # (request index, row identity)
        found: dict[str, Sample] = {}
        todo: dict[str, tuple[dict, str]] = {}  # identity -> (cache key, adapter name)
        for i, r in enumerate(requests):
            prompt = self.policy.prompt_ids(r.messages)
            for seed in r.seeds:
                key = {
                    "policy": self.policy.zoo_name,
                    "sampler": self.VERSION,
                    "adapter": hashes[r.adapter],
                    # bfloat16 and float32 (and CPU and CUDA) draw different tokens
                    "dtype": self.policy.dtype,
                    "device": self.policy.device,
                    "prompt": prompt,
                    "temperature": r.temperature,
                    "max_tokens": r.max_tokens,
                    "seed": seed,
                }
                h = digest(key)
                rows.append((i, h))
                if h in found or h in todo:
                    continue
                hit = self.cache.get(key)
                if hit is not None:
                    found[h] = Sample(**hit)
                else:
                    todo[h] = (key, r.adapter)
        if todo:
            pending = list(todo.values())
            drawn = self.policy.sample(
                [k["prompt"] for k, _ in pending],
                temperatures=[k["temperature"] for k, _ in pending],
                max_new_tokens=[k["max_tokens"] for k, _ in pending],
                seeds=[k["seed"] for k, _ in pending],
                adapters=[name for _, name in pending],
            )
            for h, (key, _), sample in zip(todo, pending, drawn, strict=True):
                self.cache.put(key, asdict(sample))
                found[h] = sample
        groups: list[list[Sample]] = [[] for _ in requests]
        for i, h in rows:
            groups[i].append(found[h])
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
    settings: dict | None = None  # `trajectory_settings` of the run (None: written before)


def latest_checkpoint(root: Path) -> Checkpoint | None:
    best = None
    for d in sorted(root.glob("step-*")):
        state = d / "state.json"
        if not state.exists():  # an interrupted write never gets here (atomic), but be sure
            continue
        body = json.loads(state.read_text())
        best = Checkpoint(d, body["steps"], body["history"], body["done"], body.get("settings"))
    return best


# train.* keys that do not change a policy's trajectory: the runs planned (each run checks
# itself), how long to train (raising it continues), and what is derived from the history
NOT_TRAJECTORY = frozenset(
    {"rewards", "seeds", "epochs", "hacking_margin", "alarm_alpha", "min_ci_groups"}
)
WHY = {
    "learning_rate": "the optimiser's state was built at the old rate, and a run whose rate "
    "changes midway is a run of neither setting",
    "lora": "the adapter's shape or scale would change under the trained weights",
}


def trajectory_settings(settings: TrainSettings) -> dict:
    """The train.* settings a checkpoint must have been trained under to be resumed."""
    return {k: v for k, v in settings.model_dump().items() if k not in NOT_TRAJECTORY}


def _flat(d: Mapping, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        out |= _flat(v, f"{prefix}{k}.") if isinstance(v, Mapping) else {f"{prefix}{k}": v}
    return out


def check_resumable(key: str, ckpt: Checkpoint, settings: TrainSettings) -> None:
    """Refuse to resume `ckpt` under settings that would change its trajectory (naming each
    key, its saved and its current value, and why where it is not obvious), or with fewer
    epochs than it has already trained. A checkpoint written before judgelab kept its
    settings cannot be checked: resumed with a warning."""
    if ckpt.steps > settings.epochs:
        raise ConfigError(
            f"train.epochs: {key} has already taken {ckpt.steps} steps, more than "
            f"train.epochs = {settings.epochs}; raise it back, or delete "
            f"{ckpt.path.parent.parent} to retrain"
        )
    if ckpt.settings is None:
        log.warning("%s: checkpoint %s does not record its settings; resuming unchecked",
                    key, ckpt.path)  # fmt: skip
        return
    saved, now = _flat(ckpt.settings), _flat(trajectory_settings(settings))
    changed = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
    if not changed:
        return
    lines = []
    for k in changed:
        why = WHY.get(k.split(".")[0])
        lines.append(
            f"train.{k}: trained with {saved.get(k)!r}, now {now.get(k)!r}"
            + (f" ({why})" if why else "")
        )
    raise ConfigError(
        f"{key}: the checkpoint {ckpt.path} was trained under other settings; resuming would "
        "change its trajectory:\n  " + "\n  ".join(lines) + "\nRestore them, or delete "
        f"{ckpt.path.parent.parent} to retrain (raising train.epochs alone continues a run)"
    )


@dataclass(frozen=True)
class JudgeRun:
    """One policy's training: its judge's name in train.rewards, the evaluator, its output
    directory and its training seed (None: `train.seed`, the single-seed layout)."""

    name: str
    judge: Evaluator
    out_dir: Path
    seed: int | None = None

    @property
    def key(self) -> str:
        """The run's name among the trainer's runs: the judge's, or `judge/seed-<s>`."""
        return self.name if self.seed is None else f"{self.name}/seed-{self.seed}"


@dataclass(frozen=True)
class Drawn:
    """One judge's round in one epoch: its requests (the training groups, then the held-out
    prompts) and the samples each drew, from the adapter whose content hash is `adapter`."""

    run: JudgeRun
    adapter: str
    requests: list[Request]
    groups: list[list[Sample]]


@dataclass(frozen=True)
class GroupScores:
    """One group of a judge's round: its candidates, the judge's rows (None for a held-out
    group, which no judge sees) and the tests' rows."""

    task: Task
    request: Request
    samples: list[Sample]
    candidates: list[Candidate]
    judged: ScoredGroup | None
    tests: ScoredGroup


@dataclass(frozen=True)
class EpochScores:
    """One judge's round, scored: its training groups, then its held-out groups."""

    drawn: Drawn
    train: list[GroupScores]
    heldout: list[GroupScores]


@dataclass
class _Tally:
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
            _sample_record(judge, epoch, "train", c, smp, r, v["score"], g)
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
            self.records.append(_sample_record(judge, epoch, "heldout", c, smp, None, passed))


class Trainer:
    """Trains one policy per judge for `settings.epochs` epochs, in lockstep, resumably.

    All judges' policies are adapters on one base model. Each epoch, one batched decode
    draws every judge's groups and held-out rows (a wide batch costs little more than a
    narrow one on CPU); then every judge's groups are scored together (`score`) and each
    judge takes its own GRPO step.
    Each judge checkpoints on its own, so after a crash judges may resume at different
    epochs: an epoch's round then holds only the judges that are at it. A judge whose calls
    failed takes no step; the others still step and checkpoint, then its error is raised. A
    run with a seed (`JudgeRun.seed`) draws its training samples from that seed and starts
    from the LoRA initialisation of that seed (`Policy.init_adapter`); runs without one (the
    single-seed layout) use `train.seed` and the policy's own initialisation.
    """

    def __init__(
        self,
        runs: Sequence[JudgeRun],
        settings: TrainSettings,
        rollout: RolloutSettings,
        tasks: Sequence[Task],
        heldout: Sequence[Task],
        cache: JsonCache,
        executor: Evaluator,
        policy_factory: Callable[[dict[str, Path | None]], Policy],
        selection_file: Path | None = None,
        scorer: Scorer = score_serially,
        min_ci_groups: int = 5,
    ) -> None:
        """`heldout`: the held-out tasks (`select: fixed`) or the pool to choose them from
        (`select: mixed`); the choice is kept in `selection_file` (JSON) for resumes.
        `scorer` makes the judge and test calls (`judgelab.scoring.Scorer`).
        `min_ci_groups`: fewest trained groups an epoch's alignment CI is drawn from."""
        names = [r.key for r in runs]
        if not runs or len(set(names)) != len(names):
            raise ConfigError(f"train.rewards: need distinct (judge, seed) runs, got {names}")
        self.runs = list(runs)
        # PEFT adapter names may not hold '.', which judge names may: number them instead.
        self.adapter = {r.key: f"judge_{i}" for i, r in enumerate(runs)}
        self.settings = settings
        self.rollout = rollout
        self.tasks = training_tasks(tasks)
        self.pool = list(heldout)
        check_disjoint(
            trained_tasks(self.tasks, settings.epochs, settings.groups_per_epoch), self.pool
        )
        self.mixed = settings.heldout.select == "mixed"
        self.heldout: list[Task] | None = None if self.mixed else self.pool
        self.selection_file = selection_file
        if self.mixed and selection_file is None:
            raise ConfigError("train.heldout.select: mixed needs a file to keep its choice in")
        self.cache = cache
        self.executor = executor
        self.policy_factory = policy_factory
        self.scorer = scorer
        self.min_ci_groups = min_ci_groups

    def _tasks_for(self, epoch: int) -> list[Task]:
        return epoch_tasks(self.tasks, epoch, self.settings.groups_per_epoch)

    def requests(self, run: JudgeRun, epoch: int) -> list[Request]:
        """The epoch's training groups, then the held-out prompts (fixed seeds every epoch).
        Seeds do not depend on the judge: equal adapters draw equal rows (policy_0). Training
        draws depend on the run's seed; held-out draws on `heldout.seed` alone."""
        train, held = self.settings, self.settings.heldout
        seed = self.settings.seed if run.seed is None else run.seed
        adapter = self.adapter[run.key]
        msgs = lambda t: policy_messages(self.rollout, t)  # noqa: E731
        return [
            Request(
                adapter,
                msgs(t),
                tuple(
                    sample_seed(seed, train_row(epoch, g, len(self.tasks), t.task_id), i)
                    for i in range(train.k)
                ),
                train.temperature,
                train.max_tokens,
            )  # fmt: skip
            for g, t in enumerate(self._tasks_for(epoch))
        ] + [
            Request(
                adapter,
                msgs(t),
                tuple(
                    sample_seed(held.seed, f"heldout|{t.task_id}", i) for i in range(held.samples)
                ),
                held.temperature,
                held.max_tokens,
            )  # fmt: skip
            for t in self._chosen()
        ]

    def _chosen(self) -> list[Task]:
        assert self.heldout is not None, "select: mixed chooses the held-out tasks first"
        return self.heldout

    def run(
        self,
        on_progress: Callable[[str, int], None] | None = None,
    ) -> dict[str, list[dict]]:
        """Train every run to `settings.epochs` (resuming from checkpoints); returns each
        run's history by `JudgeRun.key`. `on_progress(what_was_done, total)` runs after each
        unit of work (a sampling round, a run's scoring, a GRPO step); `total` is this call's
        units."""
        report = on_progress or (lambda what, total: None)
        ckpts, histories = self._resume_points()
        pending = [r for r in self.runs if not (ckpts[r.key] and ckpts[r.key].done)]
        for r in self.runs:
            if r not in pending:
                log.info("%s: training already complete (%d steps)", r.key, self.settings.epochs)
        if not pending:
            return histories
        self._load_selection(any(ckpts.values()))
        policy = self._policy(pending, ckpts)
        optimizers = {r.key: self._optimizer(r, policy, ckpts[r.key]) for r in pending}
        next_epoch = {r.key: ckpts[r.key].steps if ckpts[r.key] else 0 for r in pending}
        sampler = Sampler(policy, self.cache)
        total = self._units(pending, next_epoch)
        progress = lambda what: report(what, total)  # noqa: E731
        if self.heldout is None:  # select: mixed, not chosen yet (so no run has a checkpoint)
            first = self.adapter[pending[0].key]
            self._select(sampler, first, policy.adapter_hash(first))
            progress(f"held-out tasks chosen: {[t.task_id for t in self._chosen()]}")
        for epoch in range(min(next_epoch.values()), self.settings.epochs + 1):
            active = [r for r in pending if next_epoch[r.key] == epoch]
            if active:
                self._epoch(epoch, active, policy, sampler, optimizers, histories, progress)
                next_epoch.update((r.key, epoch + 1) for r in active)
        return histories

    def _resume_points(self) -> tuple[dict[str, Checkpoint | None], dict[str, list[dict]]]:
        """Each run's newest checkpoint, checked against the current settings (None: a fresh
        start), and its history so far. A finished run whose `train.epochs` was raised
        continues: its last row scored policy_steps without a step; it is redone (from the
        caches) and then steps."""
        ckpts: dict[str, Checkpoint | None] = {}
        histories: dict[str, list[dict]] = {}
        for r in self.runs:
            ckpt = latest_checkpoint(r.out_dir / "checkpoints")
            if ckpt is not None:
                check_resumable(r.key, ckpt, self.settings)
                if ckpt.done and ckpt.steps < self.settings.epochs:
                    history = [h for h in ckpt.history if h["epoch"] < ckpt.steps]
                    ckpt = Checkpoint(ckpt.path, ckpt.steps, history, False, ckpt.settings)
                    log.info("%s: train.epochs raised to %d; continuing from step %d",
                             r.key, self.settings.epochs, ckpt.steps)  # fmt: skip
            ckpts[r.key] = ckpt
            histories[r.key] = list(ckpt.history) if ckpt else []
        return ckpts, histories

    def _policy(
        self, pending: Sequence[JudgeRun], ckpts: Mapping[str, Checkpoint | None]
    ) -> Policy:
        """One policy with an adapter per pending run: its checkpoint's, or a fresh one."""
        import torch

        torch.manual_seed(self.settings.seed)  # the same initial adapter for every judge
        policy = self.policy_factory(
            {self.adapter[r.key]: ckpts[r.key].path if ckpts[r.key] else None for r in pending}
        )
        for r in pending:  # a seeded run starts from its seed's adapter, not the shared one
            if r.seed is not None and ckpts[r.key] is None:
                policy.init_adapter(self.adapter[r.key], r.seed)
        return policy

    def _optimizer(self, run: JudgeRun, policy: Policy, ckpt: Checkpoint | None) -> Any:
        """AdamW over the run's adapter, with its checkpoint's state; the learning rate is the
        current setting (a checked checkpoint was trained at it)."""
        import torch

        lr = self.settings.learning_rate
        policy.use(self.adapter[run.key])
        optimizer = torch.optim.AdamW(policy.trainable(), lr=lr, weight_decay=0.0)
        if ckpt is not None:
            optimizer.load_state_dict(torch.load(ckpt.path / "optimizer.pt", weights_only=True))
            for group in optimizer.param_groups:
                if group["lr"] != lr:  # an unchecked checkpoint, trained at another rate
                    log.warning("%s: learning rate %g from the checkpoint replaced by "
                                "train.learning_rate %g", run.key, group["lr"], lr)  # fmt: skip
                group["lr"] = lr
            log.info("%s: resuming at epoch %d", run.key, ckpt.steps)
        return optimizer

    def _units(self, pending: Sequence[JudgeRun], next_epoch: Mapping[str, int]) -> int:
        """Units of work left: the held-out choice, each epoch's round, and per run at that
        epoch its scoring and (but the last epoch) its step."""
        epochs = self.settings.epochs
        return (self.heldout is None) + sum(
            1 + sum(1 + (e < epochs) for r in pending if next_epoch[r.key] <= e)
            for e in range(min(next_epoch.values()), epochs + 1)
        )

    def _epoch(
        self,
        epoch: int,
        active: Sequence[JudgeRun],
        policy: Policy,
        sampler: Sampler,
        optimizers: Mapping[str, Any],
        histories: dict[str, list[dict]],
        progress: Callable[[str], None],
    ) -> None:
        """One epoch of the runs at it: one round drawn for all, scored together, then each
        run's row, step and checkpoint. A run whose calls failed takes no step; the others
        still step and checkpoint, then its error is raised."""
        drawn, rollout_s = self._draw(epoch, active, policy, sampler, progress)
        epochs = self.settings.epochs
        failure: Exception | None = None
        for d, scores in zip(drawn, self.score(epoch, drawn), strict=True):
            r = d.run
            if isinstance(scores, Exception):
                log.error("%s epoch %d: scoring failed, no step: %s", r.key, epoch, scores)
                failure = failure or scores
                continue
            row = self.epoch_row(epoch, scores)
            row.rollout_s = rollout_s
            row.dtype, row.device = policy.dtype, policy.device
            trajectories = self._trajectories(scores, policy)
            progress(f"epoch {epoch}/{epochs}: {r.key} scored, {_row_summary(row)}")
            if epoch < epochs:
                self._step(r, epoch, row, trajectories, policy, optimizers[r.key], progress)
            histories[r.key].append(asdict(row))
            self._save(r, epoch, policy, optimizers[r.key], histories[r.key])
            log.info("%s epoch %d/%d: %s", r.key, epoch, epochs, _row_summary(row))
        if failure is not None:
            raise failure

    def _draw(
        self,
        epoch: int,
        active: Sequence[JudgeRun],
        policy: Policy,
        sampler: Sampler,
        progress: Callable[[str], None],
    ) -> tuple[list[Drawn], float]:
        """The epoch's round for every active run, in one batched decode; and its seconds."""
        plans = {r.key: self.requests(r, epoch) for r in active}
        hashes = {self.adapter[r.key]: policy.adapter_hash(self.adapter[r.key]) for r in active}
        t0 = time.monotonic()
        groups = sampler.round([q for r in active for q in plans[r.key]], hashes)
        rollout_s = time.monotonic() - t0
        rows = sum(len(q.seeds) for r in active for q in plans[r.key])
        progress(f"epoch {epoch}/{self.settings.epochs}: sampled {rows} rows in {rollout_s:.0f} s")
        drawn = []
        for r in active:
            mine, groups = groups[: len(plans[r.key])], groups[len(plans[r.key]) :]
            drawn.append(Drawn(r, hashes[self.adapter[r.key]], plans[r.key], mine))
        return drawn, rollout_s

    def _step(
        self,
        run: JudgeRun,
        epoch: int,
        row: EpochRow,
        trajectories: Sequence[Trajectory],
        policy: Policy,
        optimizer: Any,
        progress: Callable[[str], None],
    ) -> None:
        """The run's GRPO step on its adapter (none when no sample has an advantage), into
        the row's step columns."""
        t0 = time.monotonic()
        policy.use(self.adapter[run.key])
        stats = (
            grpo_step(
                policy, optimizer, trajectories, self.settings.loss,
                self.settings.max_grad_norm, self.settings.temperature,
            )
            if trajectories
            else None
        )  # fmt: skip
        row.step_s = time.monotonic() - t0
        if stats is not None:
            self._record_step(row, stats)
        step = "no step (no advantage)" if stats is None else "GRPO step"
        loss = "" if stats is None else f", loss {stats.loss:.4f}"
        progress(f"epoch {epoch}/{self.settings.epochs}: {run.key} {step}{loss} in "
                 f"{row.step_s:.0f} s")  # fmt: skip

    def _load_selection(self, resuming: bool) -> None:
        if not self.mixed:
            return
        assert self.selection_file is not None
        if self.selection_file.exists():
            chosen = json.loads(self.selection_file.read_text())["heldout"]
            by_id = {t.task_id: t for t in self.pool}
            missing = [t for t in chosen if t not in by_id]
            if missing:
                raise ConfigError(
                    f"{self.selection_file}: held-out tasks {missing} are not in the pool of "
                    "train.heldout (offset/pool changed?); delete the training output to retrain"
                )
            self.heldout = [by_id[t] for t in chosen]
        elif resuming:
            raise ConfigError(
                f"{self.selection_file} is missing but checkpoints exist: the held-out choice "
                "of this run is unknown; delete the training output to retrain"
            )

    def _select(self, sampler: Sampler, adapter: str, adapter_hash: str) -> None:
        """Choose the held-out tasks on a draw of their own: the base policy (`adapter`, not
        yet trained) samples every pool task with seeds kept for the choice, and its tests
        pick the tasks. Epoch 0 then measures the chosen tasks on fresh draws (`requests`):
        measured on the draws that chose them, the baseline of a task chosen because its
        pass rate was 1/2 would be 1/2 by construction, and every judge's gain would include
        that regression to the mean. The choice is written to `selection_file`."""
        held = self.settings.heldout
        requests = [
            Request(
                adapter,
                policy_messages(self.rollout, t),
                tuple(
                    sample_seed(held.seed, f"select|{t.task_id}", i) for i in range(held.samples)
                ),
                held.temperature,
                held.max_tokens,
            )  # fmt: skip
            for t in self.pool
        ]
        groups = sampler.round(requests, {adapter: adapter_hash})
        calls = [
            GroupCall(TESTS_RUN, self.executor, task, candidates(task, req.messages, s, "select"))
            for task, req, s in zip(self.pool, requests, groups, strict=True)
        ]
        rates: dict[str, float | None] = {}  # None: fewer than 2 draws tested (sandbox errors)
        for call, result in zip(calls, self.scorer(calls), strict=True):
            if isinstance(result, Exception):
                raise result
            known = [r["score"] for r in result.rows if r["score"] is not None]
            rates[call.task.task_id] = sum(known) / len(known) if len(known) >= 2 else None
        order = [t.task_id for t in self.pool if rates[t.task_id] is not None]
        chosen, filled = select_heldout(rates, order, held.limit)
        self.heldout = [t for t in self.pool if t.task_id in chosen]
        body = {
            "rule": "mixed: the first train.heldout.limit pool tasks whose base pass rate is "
            "strictly between 0 and 1, filled up with those closest to 0.5",
            "draws": "the base policy's own draws for the choice (seeds 'select|<task>'); "
            "epoch 0 measures the chosen tasks on fresh draws (seeds 'heldout|<task>')",
            "pool": [t.task_id for t in self.pool],
            "base_pass_rate": rates,
            "heldout": chosen,
            "filled": filled,
        }
        assert self.selection_file is not None
        write_json(self.selection_file, body)
        log.info("held-out tasks %s (base pass rates %s)", chosen, [rates[t] for t in chosen])

    @staticmethod
    def _record_step(row: EpochRow, stats: StepStats) -> None:
        row.loss = stats.loss
        row.grad_norm = stats.grad_norm
        row.clip_fraction = stats.clip_fraction
        row.ratio_mean = stats.ratio_mean

    def _calls(
        self, epoch: int, drawn: Drawn
    ) -> tuple[list[tuple[GroupCall, GroupCall]], list[GroupCall]]:
        """A judge's calls for its round: (the judge, the tests) on each training group, and
        the tests on each held-out group. Flattened in this order, a serial run's order."""
        tasks = self._tasks_for(epoch)
        assert self.heldout is not None  # chosen before any round is scored
        n = len(tasks)
        train = []
        for g, (task, req, samples) in enumerate(
            zip(tasks, drawn.requests[:n], drawn.groups[:n], strict=True)
        ):
            # a repeat group's candidates get ids of their own (the first round's: no tag)
            repeat = g // len(self.tasks)
            tag = f"train|{drawn.adapter}|{epoch}" + (f"|repeat-{repeat}" if repeat else "")
            cands = candidates(task, req.messages, samples, tag)
            judged = GroupCall(f"train-{drawn.run.name}", drawn.run.judge, task, cands)
            train.append((judged, GroupCall(TESTS_RUN, self.executor, task, cands)))
        heldout = [
            GroupCall(TESTS_RUN, self.executor, task, candidates(task, req.messages, s, "heldout"))
            for task, req, s in zip(self.heldout, drawn.requests[n:], drawn.groups[n:], strict=True)
        ]
        return train, heldout

    def score(self, epoch: int, drawn: Sequence[Drawn]) -> list[EpochScores | Exception]:
        """Every judge's round of `epoch`, scored: all their calls go to the scorer at once.
        A judge any of whose calls failed gets the first such error in place of its scores."""
        plans = [self._calls(epoch, d) for d in drawn]
        flat = [c for train, heldout in plans for c in [*chain(*train), *heldout]]
        results = iter(self.scorer(flat))
        out: list[EpochScores | Exception] = []
        for d, (train, heldout) in zip(drawn, plans, strict=True):
            mine = [next(results) for _ in range(2 * len(train) + len(heldout))]
            failed = next((r for r in mine if isinstance(r, Exception)), None)
            if failed is not None:
                out.append(failed)
                continue
            done = iter([r for r in mine if isinstance(r, ScoredGroup)])  # in call order
            n = len(train)
            out.append(
                EpochScores(
                    d,
                    [GroupScores(judged.task, d.requests[g], d.groups[g], judged.candidates,
                                 next(done), next(done))
                     for g, (judged, _) in enumerate(train)],
                    [GroupScores(call.task, d.requests[n + h], d.groups[n + h], call.candidates,
                                 None, next(done))
                     for h, call in enumerate(heldout)],
                )
            )  # fmt: skip
        return out

    def epoch_row(self, epoch: int, scores: EpochScores) -> EpochRow:
        """The judge's history row for `epoch` from its scored round, and its samples; the
        GRPO step's columns, `rollout_s`, `dtype` and `device` are the caller's to fill in."""
        run = scores.drawn.run
        tally = _Tally()
        for g, group in enumerate(scores.train):
            tally.add_train(run.name, epoch, g, group)
        for group in scores.heldout:
            tally.add_heldout(run.name, epoch, group)
        n, passes, held = max(tally.samples, 1), tally.passes, tally.heldout
        return EpochRow(
            judge=run.name,
            epoch=epoch,
            adapter=scores.drawn.adapter,
            groups=len(scores.train),
            groups_skipped=tally.skipped,
            samples=tally.samples,
            **reward_stats(tally.rewards),
            unscored_rate=tally.unscored / n,
            out_of_range_rate=tally.out_of_range / n,
            train_pass_rate=sum(passes) / len(passes) if passes else None,
            heldout_pass_rate=sum(held) / len(held) if held else None,
            heldout_n=len(held),
            truth_unscored=tally.truth_unscored,
            forged=tally.forged,
            completion_tokens_mean=tally.tokens / n,
            **epoch_alignment(tally.aligned, self.min_ci_groups),
            # the seconds each call took where it ran (calls made together overlap in time)
            score_s=sum(g.judged.seconds for g in scores.train if g.judged is not None),
            heldout_s=sum(g.tests.seconds for g in scores.heldout),
            records=tally.records,
        )

    @staticmethod
    def _trajectories(scores: EpochScores, policy: Policy) -> list[Trajectory]:
        """The GRPO batch: every judged sample of a group with reward spread, but those with
        no advantage (ART drops them)."""
        trajectories: list[Trajectory] = []
        for g, group in enumerate(scores.train):
            assert group.judged is not None
            scored = [(smp, r["score"]) for smp, r in zip(group.samples, group.judged.rows,
                      strict=True) if r["status"] == "scored"]  # fmt: skip
            group_rewards = [r for _, r in scored]
            if not has_spread(group_rewards):
                continue
            prompt = policy.prompt_ids(group.request.messages)
            for (smp, _), adv in zip(scored, group_advantages(group_rewards), strict=True):
                if adv != 0.0:
                    trajectories.append(Trajectory(prompt, smp.token_ids, smp.logprobs, adv, g))
        return trajectories

    def _save(
        self, run: JudgeRun, epoch: int, policy: Policy, optimizer: Any, history: list[dict]
    ) -> None:
        import torch

        steps = min(epoch + 1, self.settings.epochs)
        done = epoch == self.settings.epochs
        with atomic_dir(run.out_dir / "checkpoints" / f"step-{steps:03d}") as tmp:
            policy.write_adapter(tmp, self.adapter[run.key])
            torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
            state = {
                "steps": steps,
                "done": done,
                "history": history,
                "settings": trajectory_settings(self.settings),
            }
            (tmp / "state.json").write_text(json.dumps(state, indent=1))


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


def history_frame(
    history: Sequence[dict], hacking_margin: float = 0.1, alarm_alpha: float = 0.05
) -> Any:
    """The history table; derived across rows (in epoch order): `evalue` and the alarm
    `reward_hacking` (`alignment.running_evalue` over the rows GRPO `stepped` on,
    `alarm_flags` at `alarm_alpha`), and the descriptive `reward_pass_divergence`
    (`hacking_margin`)."""
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
