"""The epoch loop: one LoRA policy per judge, trained with GRPO on that judge's rewards.

Row e of a judge's history describes policy_e (policy_0 is the base model): the judge's
rewards on groups sampled from it, the pass rate of those same samples under the tests
(train pass rate), and its held-out pass rate on tasks it never trains on. Rows 0..E-1 also
carry the GRPO step that turned policy_e into policy_{e+1}; row E has none.

All judges train in lockstep on one base model, one LoRA adapter each: an epoch's rollouts
for every judge come from one batched decode, and all of the epoch's calls (each judge on
its training groups, the tests on every training and held-out group) go to one `Scorer` at
once, which may make them concurrently (the training flow's fans them out); each result is
used by its call's place, so no row depends on the concurrency. With several training seeds
(`train.seeds`) each (judge, seed) is one more policy in the lockstep: its own adapter,
initialised from its seed, and its own training and held-out draws; the held-out tasks are
the same for every seed (`plan.heldout_row` says which draws are shared, and why). After
every row a policy's checkpoint `step-NNN` (NNN = optimiser steps taken) holds its adapter,
optimiser state and history so far, written atomically. A rerun resumes each policy from its
newest checkpoint: no epoch is lost or repeated. Samples are cached per row by the adapter's
content hash, so the base round (identical for every judge of a seed) is drawn once.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from itertools import chain
from pathlib import Path
from typing import Any

from judgelab.advantage import group_advantages, has_spread
from judgelab.cache import JsonCache
from judgelab.config import AnalysisSettings, RolloutSettings, TrainSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import Evaluator
from judgelab.io import atomic_dir, write_json
from judgelab.rollouts.generate import policy_messages, sample_seed
from judgelab.scoring import GroupCall, ScoredGroup, Scorer, score_serially
from judgelab.training.alignment import epoch_alignment
from judgelab.training.checkpoint import (
    Checkpoint,
    check_resumable,
    check_same_policy,
    latest_checkpoint,
    trained_on,
    trajectory_settings,
)
from judgelab.training.grpo import StepStats, Trajectory, grpo_step
from judgelab.training.history import EpochRow
from judgelab.training.plan import (
    check_disjoint,
    epoch_tasks,
    heldout_row,
    select_heldout,
    train_row,
    trained_tasks,
    training_tasks,
)
from judgelab.training.policy import Policy
from judgelab.training.round import Drawn, EpochScores, GroupScores, RewardRun
from judgelab.training.sampler import Engine, Request, Sampler, candidates
from judgelab.training.tally import Tally, reward_stats
from judgelab.verdicts import Task

log = logging.getLogger(__name__)

TESTS_RUN = "train-tests"  # the run id of the tests' calls (their rows' run_id is not kept)


def _row_summary(row: EpochRow) -> str:
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    untested = f", {row.truth_unscored} untested (sandbox error)" if row.truth_unscored else ""
    forged = f", {row.forged} forged" if row.forged else ""
    return (
        f"reward {fmt(row.reward_mean)}, train pass {fmt(row.train_pass_rate)}, "
        f"held-out pass {fmt(row.heldout_pass_rate)} (n={row.heldout_n}){untested}{forged}, "
        f"within-group alignment {fmt(row.alignment)} (n={row.alignment_groups} groups)"
    )


def behaviour_logprobs(
    policy: Policy, trajectories: Sequence[Trajectory], temperature: float
) -> list[Trajectory]:
    """`trajectories` with the log-probabilities GRPO's ratio divides by filled in where a
    sample has none (drawn by llama.cpp, `train.sampler`): the torch policy's, as it is
    now (the active adapter, just before its step), at the sampling temperature; one
    forward per prompt. The step is then on-policy for the policy that is trained."""
    import torch

    out = list(trajectories)
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(out):
        if not t.logprobs:
            by_prompt.setdefault(tuple(t.prompt_ids), []).append(i)
    policy.model.eval()
    for prompt, rows in by_prompt.items():
        p = len(prompt)
        width = p + max(len(out[i].completion_ids) for i in rows)
        tokens = torch.full((len(rows), width), policy.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for r, i in enumerate(rows):
            ids = [*prompt, *out[i].completion_ids]
            tokens[r, : len(ids)] = torch.tensor(ids)
            mask[r, : len(ids)] = 1
        with torch.no_grad():
            logp = policy.sequence_logprobs(
                tokens.to(policy.device), mask.to(policy.device), start=p - 1,
                temperature=temperature,
            ).cpu()  # fmt: skip
        for r, i in enumerate(rows):
            c = len(out[i].completion_ids)
            out[i] = replace(out[i], logprobs=[float(x) for x in logp[r, p - 1 : p - 1 + c]])
    return out


class Trainer:
    """Trains one policy per judge for `settings.epochs` epochs, in lockstep, resumably.

    All judges' policies are adapters on one base model. Each epoch, one batched decode
    draws every judge's groups and held-out rows (a wide batch costs little more than a
    narrow one on CPU); then every judge's groups are scored together (`score`) and each
    judge takes its own GRPO step.
    Each judge checkpoints on its own, so after a crash judges may resume at different
    epochs: an epoch's round then holds only the judges that are at it. A judge whose calls
    failed takes no step; the others still step and checkpoint, then its error is raised. A
    run with a seed (`RewardRun.seed`) draws its training samples from that seed and starts
    from the LoRA initialisation of that seed (`Policy.init_adapter`); runs without one (the
    single-seed layout) use `train.seed` and the policy's own initialisation.
    """

    def __init__(
        self,
        runs: Sequence[RewardRun],
        settings: TrainSettings,
        rollout: RolloutSettings,
        tasks: Sequence[Task],
        heldout: Sequence[Task],
        cache: JsonCache,
        executor: Evaluator,
        policy_factory: Callable[[dict[str, Path | None]], Policy],
        selection_file: Path | None = None,
        scorer: Scorer = score_serially,
        min_ci_groups: int = AnalysisSettings.model_fields["min_ci_groups"].default,
        engine_factory: Callable[[Policy], Engine] | None = None,
        groups_file: Path | None = None,
    ) -> None:
        """`heldout`: the held-out tasks (`select: fixed`) or the pool to choose them from
        (`select: mixed`); the choice is kept in `selection_file` (JSON) for resumes, and
        `train.select: mixed`'s choice of training tasks in `groups_file`.
        `scorer` makes the judge and test calls (`judgelab.scoring.Scorer`).
        `min_ci_groups`: fewest trained groups an epoch's alignment CI is drawn from
        (`analysis.min_ci_groups`: one minimum for every CI). `engine_factory`: what draws
        the samples given the policy (`train.sampler: llama.cpp`); None: the policy's own
        torch decode."""
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
        # select: mixed chooses the training tasks among those outside the held-out pool
        pooled = {t.task_id for t in self.pool}
        self.candidates = [t for t in self.tasks if t.task_id not in pooled]
        self.groups_file = groups_file
        self.train_tasks: list[Task] | None = self.tasks
        if settings.select == "mixed":
            if not self.candidates:
                raise ConfigError("train.select: mixed: every task with tests is held out")
            if groups_file is None:
                raise ConfigError("train.select: mixed needs a file to keep its choice in")
            self.train_tasks = None
        else:
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
        self.engine_factory = engine_factory

    def _tasks_for(self, epoch: int) -> list[Task]:
        assert self.train_tasks is not None, "select: mixed chooses the training tasks first"
        return epoch_tasks(self.train_tasks, epoch, self.settings.groups_per_epoch)

    def _train_request(self, run: RewardRun, epoch: int, g: int, n: int, task: Task) -> Request:
        """Training group `g` of `epoch` (of `n` training tasks) for `run`: train.k draws
        seeded by the run's seed and the group's row (`plan.train_row`)."""
        seed = self.settings.seed if run.seed is None else run.seed
        return Request(
            self.adapter[run.key],
            policy_messages(self.rollout, task),
            tuple(sample_seed(seed, train_row(epoch, g, n, task.task_id), i)
                  for i in range(self.settings.k)),
            self.settings.temperature,
            self.settings.max_tokens,
        )  # fmt: skip

    def requests(self, run: RewardRun, epoch: int) -> list[Request]:
        """The epoch's training groups, then the held-out prompts (the same seeds every epoch).
        Seeds do not depend on the judge: equal adapters draw equal rows (policy_0). Training
        draws depend on the run's seed; held-out draws on `heldout.seed` and the run's
        training seed (`plan.heldout_row`)."""
        held = self.settings.heldout
        adapter = self.adapter[run.key]
        msgs = lambda t: policy_messages(self.rollout, t)  # noqa: E731
        assert self.train_tasks is not None
        n = len(self.train_tasks)
        return [
            self._train_request(run, epoch, g, n, t) for g, t in enumerate(self._tasks_for(epoch))
        ] + [
            Request(
                adapter,
                msgs(t),
                tuple(
                    sample_seed(held.seed, heldout_row(t.task_id, run.seed), i)
                    for i in range(held.samples)
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
        run's history by `RewardRun.key`. `on_progress(what_was_done, total)` runs after each
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
        for r in pending:  # what `train.dtype: auto` resolved to is known from here on
            if ckpts[r.key] is not None:
                check_same_policy(r.key, ckpts[r.key], policy.dtype, policy.device)
        optimizers = {r.key: self._optimizer(r, policy, ckpts[r.key]) for r in pending}
        next_epoch = {r.key: ckpts[r.key].steps if ckpts[r.key] else 0 for r in pending}
        engine = self.engine_factory(policy) if self.engine_factory else None
        sampler = Sampler(policy, self.cache, engine)
        total = self._units(pending, next_epoch)
        progress = lambda what: report(what, total)  # noqa: E731
        if self.heldout is None:  # select: mixed, not chosen yet (so no run has a checkpoint)
            first = self.adapter[pending[0].key]
            self._select(sampler, first, policy.adapter_hash(first))
            progress(f"held-out tasks chosen: {[t.task_id for t in self._chosen()]}")
        if self.train_tasks is None:  # train.select: mixed, not chosen yet
            first = self.adapter[pending[0].key]
            self._select_groups(sampler, pending[0], policy.adapter_hash(first))
            assert self.train_tasks is not None
            progress(f"training tasks chosen: {[t.task_id for t in self.train_tasks]}")
        for epoch in range(min(next_epoch.values()), self.settings.epochs + 1):
            active = [r for r in pending if next_epoch[r.key] == epoch]
            if active:
                self._epoch(epoch, active, policy, sampler, optimizers, histories, progress)
                next_epoch.update((r.key, epoch + 1) for r in active)
        return histories

    def _trained_on(self, run: RewardRun, policy: Policy | None = None) -> dict[str, Any]:
        """The run's resume key beside train.* (`checkpoint.trained_on`); the policy's dtype
        and device once it is built."""
        return trained_on(
            self.rollout,
            self.tasks,
            self.pool,
            run.judge.spec.model_dump(mode="json"),
            self.executor.spec.model_dump(mode="json"),
            policy.dtype if policy else None,
            policy.device if policy else None,
        )

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
                check_resumable(r.key, ckpt, self.settings, self._trained_on(r))
                if ckpt.done and ckpt.steps < self.settings.epochs:
                    history = [h for h in ckpt.history if h["epoch"] < ckpt.steps]
                    ckpt = Checkpoint(
                        ckpt.path, ckpt.steps, history, False, ckpt.settings, ckpt.trained_on
                    )
                    log.info("%s: train.epochs raised to %d; continuing from step %d",
                             r.key, self.settings.epochs, ckpt.steps)  # fmt: skip
            ckpts[r.key] = ckpt
            histories[r.key] = list(ckpt.history) if ckpt else []
        return ckpts, histories

    def _policy(
        self, pending: Sequence[RewardRun], ckpts: Mapping[str, Checkpoint | None]
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

    def _optimizer(self, run: RewardRun, policy: Policy, ckpt: Checkpoint | None) -> Any:
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

    def _units(self, pending: Sequence[RewardRun], next_epoch: Mapping[str, int]) -> int:
        """Units of work left: the held-out choice, each epoch's round, and per run at that
        epoch its scoring and (but the last epoch) its step."""
        epochs = self.settings.epochs
        return (
            (self.heldout is None)
            + (self.train_tasks is None)
            + sum(
                1 + sum(1 + (e < epochs) for r in pending if next_epoch[r.key] <= e)
                for e in range(min(next_epoch.values()), epochs + 1)
            )
        )

    def _epoch(
        self,
        epoch: int,
        active: Sequence[RewardRun],
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
        active: Sequence[RewardRun],
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
        run: RewardRun,
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
        trajectories = behaviour_logprobs(policy, trajectories, self.settings.temperature)
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
        self._load_groups(resuming)
        if not self.mixed:
            return
        assert self.selection_file is not None
        chosen = read_choice(
            self.selection_file, "heldout", self.pool, resuming,
            "held-out tasks {} are not in the pool of train.heldout (offset/pool changed?)",
            "the held-out choice of this run is unknown",
        )  # fmt: skip
        if chosen is not None:
            self.heldout = chosen

    def _load_groups(self, resuming: bool) -> None:
        """`train.select: mixed`'s choice of training tasks, from `groups_file` if made."""
        if self.train_tasks is not None:
            return
        assert self.groups_file is not None
        self.train_tasks = read_choice(
            self.groups_file, "train", self.candidates, resuming,
            "training tasks {} are no longer training tasks outside the held-out pool",
            "the training tasks of this run are unknown",
        )  # fmt: skip

    def _pass_rates(
        self, sampler: Sampler, requests: Sequence[Request], tasks: Sequence[Task],
        hashes: Mapping[str, str], tag: str,
    ) -> dict[str, float | None]:  # fmt: skip
        """Each task's pass rate under the tests on its request's draws (None: fewer than 2
        draws tested, sandbox errors)."""
        groups = sampler.round(requests, hashes)
        calls = [
            GroupCall(TESTS_RUN, self.executor, task, candidates(task, req.messages, s, tag))
            for task, req, s in zip(tasks, requests, groups, strict=True)
        ]
        rates: dict[str, float | None] = {}
        for call, result in zip(calls, self.scorer(calls), strict=True):
            if isinstance(result, Exception):
                raise result
            known = [r["score"] for r in result.rows if r["score"] is not None]
            rates[call.task.task_id] = sum(known) / len(known) if len(known) >= 2 else None
        return rates

    def _select_groups(self, sampler: Sampler, run: RewardRun, adapter_hash: str) -> None:
        """Choose the training tasks as the held-out ones are chosen (`train.select`): the
        base policy's epoch-0 draws of each candidate task (the very rows epoch 0 trains on:
        same adapter, seeds and settings, so the round reuses them from the cache), tested,
        a batch of `need` tasks at a time until `need` are mixed or `train.screen` x `need`
        were screened. Written to `groups_file`."""
        need = self.settings.epochs * self.settings.groups_per_epoch
        limit = min(len(self.candidates), self.settings.screen * need)
        hashes = {self.adapter[run.key]: adapter_hash}
        rates: dict[str, float | None] = {}
        for start in range(0, limit, need):
            batch = self.candidates[start : min(start + need, limit)]
            requests = [self._train_request(run, 0, 0, 1, t) for t in batch]
            rates |= self._pass_rates(sampler, requests, batch, hashes, "screen")
            if sum(r is not None and 0 < r < 1 for r in rates.values()) >= need:
                break
        order = [t.task_id for t in self.candidates if rates.get(t.task_id) is not None]
        if not order:
            raise ConfigError("train.select: mixed: no screened training task could be tested")
        # the held-out rule, on the training candidates: mixed first, then closest to 0.5
        chosen, filled = select_heldout(rates, order, need)
        by_id = {t.task_id: t for t in self.candidates}
        self.train_tasks = [by_id[t] for t in chosen]
        assert self.groups_file is not None
        write_json(self.groups_file, {
            "rule": "train.select: mixed: the first epochs x groups_per_epoch training tasks "
            "(outside the held-out pool) whose base pass rate on their epoch-0 draws is "
            "strictly between 0 and 1, filled up with those closest to 0.5",
            "screened": list(rates), "base_pass_rate": rates, "train": chosen,
            "filled": filled, "k": self.settings.k,
        })  # fmt: skip
        log.info("training tasks %s (base pass rates %s)", chosen, [rates[t] for t in chosen])

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
        rates = self._pass_rates(sampler, requests, self.pool, {adapter: adapter_hash}, "select")
        order = [t.task_id for t in self.pool if rates[t.task_id] is not None]
        chosen, filled = select_heldout(rates, order, held.limit)
        self.heldout = [t for t in self.pool if t.task_id in chosen]
        body = {
            "rule": "mixed: the first train.heldout.limit pool tasks whose base pass rate is "
            "strictly between 0 and 1, filled up with those closest to 0.5",
            "draws": "the base policy's own draws for the choice (seeds 'select|<task>'); "
            "epoch 0 measures the chosen tasks on fresh draws (seeds 'heldout|<task>', or "
            "'heldout|seed-<s>|<task>' for training seed s)",
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
            repeat = g // len(self.train_tasks or tasks)
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
        tally = Tally()
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
        self, run: RewardRun, epoch: int, policy: Policy, optimizer: Any, history: list[dict]
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
                "trained_on": self._trained_on(run, policy),
            }
            (tmp / "state.json").write_text(json.dumps(state, indent=1))


def read_choice(
    path: Path, key: str, tasks: Sequence[Task], resuming: bool, stale: str, unknown: str
) -> list[Task] | None:
    """The tasks a run chose (`path`'s `key`: task ids), from `tasks`; None where no choice was
    written yet. A chosen id no longer among `tasks` (`stale`, its `{}` the ids) and a resume
    without the file (`unknown`) are errors naming the file: the run cannot continue as it was."""
    retrain = "; delete the training output to retrain"
    if not path.exists():
        if resuming:
            raise ConfigError(f"{path} is missing but checkpoints exist: {unknown}{retrain}")
        return None
    chosen = json.loads(path.read_text())[key]
    by_id = {t.task_id: t for t in tasks}
    if missing := [t for t in chosen if t not in by_id]:
        raise ConfigError(f"{path}: {stale.format(missing)}{retrain}")
    return [by_id[t] for t in chosen]
