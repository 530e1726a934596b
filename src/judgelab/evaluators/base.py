"""The two shapes of evaluator: pointwise (one candidate per call) and group (all at once)."""

from __future__ import annotations

from typing import Protocol

from judgelab.types import Candidate, Task, Verdict


class PointwiseEvaluator(Protocol):
    name: str
    protocol: str

    def score(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict: ...


class GroupEvaluator(Protocol):
    name: str
    protocol: str

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]: ...
