"""Where the training-effect study's samples come from (`training.study`).

- `PolicyDraws` (the default): the training policy draws them, through the sampling cache:
  each seed draws fresh samples of the same first `study.groups` training tasks, and the bank
  is `study.bank_samples` samples of each bank task.
- `TableDraws` (`study.rollouts`): an audit's rollouts table, the policy's own samples that
  its judges scored (the natural population; known-truth contrast rows are left out). The
  study then trains on the very groups the audit measured. The table holds one group per
  task, so with `method: steps` seed i trains on the i-th block of `study.groups` tasks (the
  seed-to-seed spread is then the tasks' as well as the adapter's); with `first-order`,
  every seed takes the first block (its spread is the adapter's; the groups' is in the CI).
  The bank is `study.bank_ids`, or else the first `study.bank_size` tasks after the training
  blocks whose samples both pass and fail the tests (a task whose samples all pass or all
  fail adds nothing to the effect); blocks and bank follow the tasks table's order.
  A table sample's token ids are its text re-encoded (plus the stop token when it stopped),
  and the log-probabilities GRPO's importance ratio divides by are the base policy's at the
  training temperature, computed when an arm first needs them (`fill_logprobs`): the first
  step's ratio is then 1, as if the training policy had drawn the samples itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from judgelab.cache import JsonCache
from judgelab.config import RolloutSettings, TrainSettings
from judgelab.config.training import StudySettings
from judgelab.errors import ConfigError
from judgelab.rollouts.generate import candidates_by_group, policy_messages, sample_seed
from judgelab.rollouts.origins import origin
from judgelab.training.policy import Policy, Sample
from judgelab.training.sampler import Request, Sampler, candidates
from judgelab.verdicts import Candidate, Task

# The tests' verdicts on groups: each group's per-candidate passed (None: untested).
Verdicts = list[bool | None]
Tester = Callable[[Sequence["Drawn"]], list[Verdicts]]


@dataclass(frozen=True)
class Drawn:
    """One task's group of base-policy samples: what the policy trains on (`samples`; their
    `logprobs` empty until known) and what the judges score (`candidates`, in the same order)."""

    task: Task
    messages: list[dict]
    samples: list[Sample]
    candidates: list[Candidate]


class PolicyDraws:
    """Samples drawn from the training policy (module docstring)."""

    def __init__(
        self,
        tasks: Sequence[Task],
        bank_tasks: Sequence[Task],
        study: StudySettings,
        train: TrainSettings,
        rollout: RolloutSettings,
        cache: JsonCache,
    ) -> None:
        self.tasks = [t for t in tasks if t.test][: study.groups]
        if not self.tasks:
            raise ConfigError("study: no training task with tests")
        overlap = {t.task_id for t in self.tasks} & {t.task_id for t in bank_tasks}
        if overlap:
            raise ConfigError(f"study: bank tasks {sorted(overlap)} are also trained on")
        self.bank_tasks = list(bank_tasks)
        self.study, self.train, self.rollout, self.cache = study, train, rollout, cache

    def _draw(
        self, policy: Policy, tasks: Sequence[Task], seed: int, n: int, tag: str
    ) -> list[Drawn]:
        adapter = policy.active
        requests = [
            Request(
                adapter,
                policy_messages(self.rollout, t),
                tuple(sample_seed(seed, f"{tag}|{t.task_id}", i) for i in range(n)),
                self.train.temperature,
                self.train.max_tokens,
            )
            for t in tasks
        ]
        groups = Sampler(policy, self.cache).round(
            requests, {adapter: policy.adapter_hash(adapter)}
        )
        return [
            Drawn(t, r.messages, s, candidates(t, r.messages, s, f"{tag}|{seed}"))
            for t, r, s in zip(tasks, requests, groups, strict=True)
        ]

    def bank(self, policy: Policy, tester: Tester) -> list[tuple[Drawn, Verdicts]]:
        """The bank's groups with the tests' verdicts (`tester`, once per group)."""
        policy.init_adapter(policy.active, self.study.bank_seed)
        drawn = self._draw(
            policy, self.bank_tasks, self.study.bank_seed, self.study.bank_samples, "bank"
        )
        return list(zip(drawn, tester(drawn), strict=True))

    def training(self, policy: Policy, index: int, seed: int) -> list[Drawn]:
        policy.init_adapter(policy.active, seed)
        return self._draw(policy, self.tasks, seed, self.train.k, "study")


class TableDraws:
    """An audit's own groups, from its rollouts table (module docstring)."""

    def __init__(
        self, frame: Any, tasks: Sequence[Task], study: StudySettings, writer: str
    ) -> None:
        natural = {w for w in frame["policy"].unique().to_list() if origin(w) == "natural"}
        if natural != {writer}:
            raise ConfigError(
                f"study.rollouts: the table's policy samples are {sorted(natural)}'s; the study "
                f"trains train.policy ({writer}) and needs its own samples only"
            )
        by_id = {t.task_id: t for t in tasks}
        groups = {
            task_id: group
            for (task_id, population), group in candidates_by_group(frame, True).items()
            if population == "natural"
        }
        missing = sorted(set(groups) - set(by_id))
        if missing:
            raise ConfigError(f"study.rollouts: tasks {missing[:5]} are not in the tasks table")
        # in the tasks table's order (HumanEval/2 before HumanEval/10), not the table's sort
        self.groups = {
            t.task_id: groups[t.task_id]
            for t in tasks
            if t.task_id in groups and t.test and len(groups[t.task_id]) >= 2
        }
        self.tasks = by_id
        self.finish = {r["candidate_id"]: r["finish_reason"] for r in frame.iter_rows(named=True)}
        self.study = study
        order = [i for i in self.groups if i not in set(study.bank_ids)]
        # first order: every seed on the same groups (the seeds differ in their adapter only);
        # steps: a block of its own per seed
        blocks = 1 if study.method == "first-order" else len(study.seeds)
        need = study.groups * blocks
        if len(order) < need:
            raise ConfigError(
                f"study.rollouts: {len(order)} tested groups outside the bank, and "
                f"{len(study.seeds)} seeds x {study.groups} groups need {need}"
            )
        self.blocks = [order[i * study.groups : (i + 1) * study.groups]
                       for i in range(blocks)]  # fmt: skip
        self.rest = order[need:]
        unknown = sorted(set(study.bank_ids) - set(self.groups))
        if unknown:
            raise ConfigError(f"study.bank_ids: {unknown} have no tested group in the table")

    def _drawn(self, policy: Policy, task_id: str) -> Drawn:
        group = self.groups[task_id]
        messages = group[0].messages
        stop = policy.stop_ids[0]
        samples = []
        for c in group:
            ids = policy.tokenizer.encode(c.completion, add_special_tokens=False)
            finish = self.finish[c.candidate_id] or "length"
            if finish == "stop":
                ids = [*ids, stop]
            if not ids:
                ids = [stop]
            samples.append(Sample([int(t) for t in ids], [], c.completion, finish))
        return Drawn(self.tasks[task_id], messages, samples, list(group))

    def bank(self, policy: Policy, tester: Tester) -> list[tuple[Drawn, Verdicts]]:
        """The bank's groups with the tests' verdicts (`tester`, once per group tried)."""
        if self.study.bank_ids:
            drawn = [self._drawn(policy, i) for i in self.study.bank_ids]
            return list(zip(drawn, tester(drawn), strict=True))
        size, chosen = self.study.bank_size, []
        for start in range(0, len(self.rest), size):  # tested a bank's worth at a time
            if len(chosen) >= size:
                break
            drawn = [self._drawn(policy, i) for i in self.rest[start : start + size]]
            for d, passed in zip(drawn, tester(drawn), strict=True):
                if {True, False} <= set(passed) and len(chosen) < size:
                    chosen.append((d, passed))
        if not chosen:
            raise ConfigError(
                "study.rollouts: no untrained task has both a passing and a failing sample"
            )
        return chosen

    def training(self, policy: Policy, index: int, seed: int) -> list[Drawn]:
        policy.init_adapter(policy.active, seed)
        return [self._drawn(policy, i) for i in self.blocks[index % len(self.blocks)]]


def fill_logprobs(policy: Policy, drawn: Sequence[Drawn], temperature: float) -> list[Drawn]:
    """`drawn` with every sample's log-probabilities under the policy as it is now (the base
    policy: the caller has just re-initialised the adapter) at `temperature`, the
    distribution the training forwards divide by; samples that have them keep them."""
    import torch

    out = []
    policy.model.eval()
    for d in drawn:
        if all(s.logprobs for s in d.samples):
            out.append(d)
            continue
        prompt = policy.prompt_ids(d.messages)
        width = len(prompt) + max(len(s.token_ids) for s in d.samples)
        tokens = torch.full((len(d.samples), width), policy.pad_id, dtype=torch.long)
        mask = torch.zeros((len(d.samples), width), dtype=torch.long)
        for r, s in enumerate(d.samples):
            ids = prompt + s.token_ids
            tokens[r, : len(ids)] = torch.tensor(ids)
            mask[r, : len(ids)] = 1
        with torch.no_grad():
            logp = policy.sequence_logprobs(
                tokens.to(policy.device), mask.to(policy.device), start=len(prompt) - 1,
                temperature=temperature,
            ).cpu()  # fmt: skip
        p = len(prompt)
        samples = [
            replace(s, logprobs=[float(x) for x in logp[r, p - 1 : p - 1 + len(s.token_ids)]])
            for r, s in enumerate(d.samples)
        ]
        out.append(replace(d, samples=samples))
    return out


def drawn_digest(drawn: Sequence[Drawn]) -> list[Any]:
    """What identifies a seed's groups for the study's result cache: each group's prompt and
    its samples' token ids (not their log-probabilities, which the hardware rounds)."""
    return [[json.dumps(d.messages, sort_keys=True), [s.token_ids for s in d.samples]]
            for d in drawn]  # fmt: skip
