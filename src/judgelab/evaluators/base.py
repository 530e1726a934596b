"""The evaluator seam: what the scores stage, the probes and training call.

An evaluator is built from its settings by `judgelab.evaluators.registry.build_evaluator`,
keeps them as `spec` (its `name` is the spec's) and has one scoring method,
`score_group(task, candidates, repeat) -> list[Verdict]`: one verdict per candidate, in
candidate order, each scored in [0, 1] or unscored with a reason. `repeat` numbers the
scores stage's repeats (a judge that samples a model must sample anew for each);
deterministic evaluators ignore it. A pointwise evaluator implements `score_one` and
inherits `score_group`; a group evaluator implements `score_group` itself.

`judge_group(task, candidates, repeat) -> JudgeResult` scores as `score_group` does and also
returns the record of every model call made (`JudgeCall`): none for an evaluator that calls
no model; LLM judges (`judgelab.evaluators.llm_judge`) return theirs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from judgelab.verdicts import Candidate, Task, Verdict

if TYPE_CHECKING:
    from judgelab.config.evaluators import EvaluatorSettings
    from judgelab.evaluators.transport.provider import CallRecord


@dataclass(frozen=True)
class JudgeCall:
    """One judge call and its retries: the `CallRecord` of each attempt, in order."""

    candidate_id: str | None  # the candidate a pointwise call judged; None: the whole group
    attempts: list[CallRecord]


@dataclass(frozen=True)
class JudgeResult:
    """Verdicts in candidate order, and every judge call made to reach them."""

    verdicts: list[Verdict]
    calls: list[JudgeCall] = field(default_factory=list)

    @property
    def records(self) -> list[CallRecord]:
        """Every attempt's record, call by call."""
        return [record for call in self.calls for record in call.attempts]


class Evaluator(ABC):
    protocol: ClassVar[str]  # the scores table's `protocol`: rule, execution, ruler, rubric

    def __init__(self, spec: EvaluatorSettings) -> None:
        self.spec = spec
        self.name: str = spec.name

    @abstractmethod
    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]: ...

    def judge_group(self, task: Task, candidates: list[Candidate], repeat: int = 0) -> JudgeResult:
        """`score_group`'s verdicts with the model calls made: none here."""
        return JudgeResult(self.score_group(task, candidates, repeat))


class PointwiseEvaluator(Evaluator):
    """An evaluator that judges each candidate on its own: up to `concurrency` of a group at
    once (the sandbox: one per core), the verdicts in candidate order whatever finishes
    first."""

    concurrency: int = 1

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]:
        workers = min(self.concurrency, len(candidates))
        if workers <= 1:
            return [self.score_one(task, c, repeat) for c in candidates]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(lambda c: self.score_one(task, c, repeat), candidates))

    @abstractmethod
    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict: ...
