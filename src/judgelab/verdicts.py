"""The data model every stage speaks: a Task, its Candidates, one Verdict per candidate.

Tasks come from `judgelab.tasks`, candidates from `judgelab.rollouts`, verdicts from
`judgelab.evaluators`. A verdict carries a score in [0, 1] or an explicit *unscored* status
with its reason: never a silent drop, never a substitute 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Status = Literal["scored", "unscored"]

# What the tests said of a candidate's code (the execution evaluator's verdicts only).
Outcome = Literal[
    "passed", "tests_failed", "forged", "not_parsed", "no_code", "sandbox_error", "no_tests"
]
OUTCOMES: tuple[Outcome, ...] = (
    "passed",
    "tests_failed",  # the code ran and did not pass: a test, timeout, memory, a signal
    "forged",  # the code tried to fake a pass (left before the tests finished, a forged value)
    "not_parsed",  # the program did not compile: no test ran
    "no_code",  # nothing to run
    "sandbox_error",  # the sandbox could not run it: no verdict on the code
    "no_tests",  # the task has no tests: no verdict on the code
)
UNPARSEABLE: tuple[Outcome, ...] = ("no_code", "not_parsed")


@dataclass(frozen=True)
class Task:
    task_id: str
    source: str
    prompt: str
    entry_point: str | None = None
    test: str | None = None
    canonical_solution: str | None = None
    request: str = ""  # the user turn the policy saw


@dataclass(frozen=True)
class Candidate:
    task_id: str
    candidate_id: str
    sample_index: int
    completion: str
    messages: list[dict] = field(default_factory=list)  # the prompt the policy saw


@dataclass(frozen=True)
class Verdict:
    status: Status
    score: float | None = None
    raw_score: float | None = None
    out_of_range: bool = False
    reason: str | None = None
    explanation: str | None = None
    latency_s: float = 0.0
    slot: int | None = None  # position the judge saw this candidate at (group judges)
    permutation: str | None = None  # the order shown to the judge, as candidate indices
    outcome: Outcome | None = None  # the execution evaluator's reading of the run; else None

    def __post_init__(self) -> None:
        if self.status == "scored":
            if self.score is None or not (0.0 <= self.score <= 1.0):
                raise ValueError(f"scored verdict needs a score in [0, 1], got {self.score!r}")
        elif self.score is not None or not self.reason:
            raise ValueError("unscored verdict needs a reason and no score")
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is not one of {OUTCOMES}")

    @classmethod
    def scored(cls, score: float, **kw: object) -> Verdict:
        return cls(status="scored", score=float(score), **kw)  # type: ignore[arg-type]

    @classmethod
    def unscored(cls, reason: str, **kw: object) -> Verdict:
        return cls(status="unscored", reason=reason, **kw)  # type: ignore[arg-type]
