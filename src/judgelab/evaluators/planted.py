"""Planted judges: the tests' verdicts, corrupted at a known rate.

`PlantedJudge` runs the task's tests (the execution evaluator, in the sandbox) and returns
each tested candidate's verdict as its reward, 1.0 for a pass and 0.0 otherwise, with two
known corruptions (`config.evaluators.PlantedSettings`):

- `flip`: each verdict is flipped with probability `flip`, decided by `flipped(seed,
  candidate_id, flip)`, a uniform drawn from a hash of (seed, candidate id): the same
  candidate is flipped in every run, at every rate below which it is flipped (the flipped
  sets are nested as the rate rises);
- `shuffle` (the placebo): the group's verdicts (after flipping) are permuted among its
  tested candidates by a generator seeded from (seed, the group's candidate ids): the group
  keeps its share of rewards of 1, but which candidate gets one no longer depends on its code.

A candidate the tests leave unscored (a sandbox error, no tests) stays unscored, with the
tests' reason. Expected audit figures, by construction: flip 0 is the tests (signal fidelity
1); flip f has, in a group that the tests split, expected agreement 1 - 2f on the candidates'
verdicts (0 at f = 0.5, -1 at f = 1); the placebo's agreement with the tests is 0 in
expectation.
"""

from __future__ import annotations

import hashlib
import random

from judgelab.config.evaluators import ExecutionSettings, PlantedSettings
from judgelab.evaluators.base import Evaluator
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.verdicts import Candidate, Task, Verdict


def _uniform(*parts: object) -> float:
    """A uniform in [0, 1) from a hash of `parts` (stable across runs and machines)."""
    h = hashlib.sha256("|".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def flipped(seed: int, candidate_id: str, flip: float) -> bool:
    """Whether the candidate's verdict is flipped at rate `flip` (nested in `flip`)."""
    return _uniform("flip", seed, candidate_id) < flip


def planted_rewards(
    passed: list[bool | None], candidate_ids: list[str], flip: float, shuffle: bool, seed: int
) -> list[float | None]:
    """The planted rewards of one group from its tests' verdicts (None: untested)."""
    out: list[float | None] = [
        None if p is None else float(p != flipped(seed, cid, flip))
        for p, cid in zip(passed, candidate_ids, strict=True)
    ]
    if shuffle:
        tested = [i for i, r in enumerate(out) if r is not None]
        values = [out[i] for i in tested]
        random.Random(f"shuffle|{seed}|{'|'.join(candidate_ids)}").shuffle(values)
        for i, v in zip(tested, values, strict=True):
            out[i] = v
    return out


class SharedTests(ExecutionEvaluator):
    """The tests, run once per group and repeat however many judges ask: a study's planted
    arms all read the verdicts that its own tests gave (and the sandbox runs a group once)."""

    def __init__(self, spec: ExecutionSettings) -> None:
        super().__init__(spec)
        self._seen: dict[tuple[str, tuple[str, ...], int], list[Verdict]] = {}

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]:
        key = (task.task_id, tuple(c.candidate_id for c in candidates), repeat)
        if key not in self._seen:
            self._seen[key] = super().score_group(task, candidates, repeat)
        return list(self._seen[key])


class PlantedJudge(Evaluator):
    """The tests' verdicts, flipped at rate `flip` and/or shuffled within the group; `tests`:
    where the verdicts come from (default: the spec's tests, run here)."""

    protocol = PlantedSettings.protocol
    spec: PlantedSettings

    def __init__(self, spec: PlantedSettings, tests: ExecutionEvaluator | None = None) -> None:
        super().__init__(spec)
        self.tests = tests if tests is not None else ExecutionEvaluator(spec.tests)

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]:
        # `repeat` is accepted for the common evaluator signature; a planted judge is
        # deterministic.
        truth = self.tests.score_group(task, candidates)
        passed = [None if v.status != "scored" else v.score == 1.0 for v in truth]
        ids = [c.candidate_id for c in candidates]
        rewards = planted_rewards(passed, ids, self.spec.flip, self.spec.shuffle, self.spec.seed)
        what = f"tests' verdict, flip {self.spec.flip:g}" + (", shuffled" if self.spec.shuffle
                                                             else "")  # fmt: skip
        return [
            Verdict.unscored(v.reason or "untested", latency_s=v.latency_s)
            if r is None
            else Verdict.scored(r, reason=what, latency_s=v.latency_s)
            for v, r in zip(truth, rewards, strict=True)
        ]
