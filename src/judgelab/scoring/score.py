"""The scores stage's logic: every evaluator scores every group; one row per verdict.

Each evaluator (`judgelab.evaluators.base.Evaluator`, built by the evaluator registry) scores
one task group per `score_group` call. Deterministic evaluators run once (repeat 0); LLM
judges run `scores.repeats` times (`spec.repeats`). Whatever happens to a candidate becomes a
row — scored, or unscored with its reason.

A `GroupCall` is one such call not yet made, for code that lists its calls first and has a
`Scorer` run them (training: the flow's scorer fans them out, `score_serially` does not).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from judgelab.cache import digest
from judgelab.config import PRICE_KEYS, RATE_LIMIT_KEYS, Settings
from judgelab.evaluators.base import Evaluator
from judgelab.schemas import ScoresSchema, columns, validate
from judgelab.verdicts import Candidate, Task, Verdict

if TYPE_CHECKING:
    from judgelab.evaluators.transport.provider import CallRecord

EXPLANATION_LIMIT = 2000


def _row(run_id: str, ev: Evaluator, cand: Candidate, repeat: int, v: Verdict) -> dict[str, Any]:
    explanation = v.explanation[:EXPLANATION_LIMIT] if v.explanation else v.explanation
    return {
        "run_id": run_id,
        "task_id": cand.task_id,
        "candidate_id": cand.candidate_id,
        "evaluator": ev.name,
        "protocol": ev.protocol,
        "judge": ev.spec.judge_model,
        "repeat": repeat,
        "score": v.score,
        "raw_score": v.raw_score,
        "status": v.status,
        "out_of_range": v.out_of_range,
        "reason": v.reason,
        "explanation": explanation,
        "latency_s": max(0.0, float(v.latency_s)),
        "slot": v.slot,
        "permutation": v.permutation,
        "outcome": v.outcome,
    }


def score_group(
    run_id: str, ev: Evaluator, task: Task, candidates: list[Candidate], repeat: int
) -> list[dict[str, Any]]:
    """Rows for one (evaluator, task group, repeat)."""
    return group_rows(run_id, ev, candidates, repeat, ev.score_group(task, candidates, repeat))


def group_rows(
    run_id: str, ev: Evaluator, candidates: list[Candidate], repeat: int, verdicts: list[Verdict]
) -> list[dict[str, Any]]:
    """The rows of `ev`'s `verdicts` for one group's `candidates`, one per candidate."""
    if len(verdicts) != len(candidates):
        raise RuntimeError(
            f"{ev.name} returned {len(verdicts)} verdicts for {len(candidates)} candidates"
        )
    return [_row(run_id, ev, c, repeat, v) for c, v in zip(candidates, verdicts, strict=True)]


@dataclass(frozen=True)
class ScoredGroup:
    """What a `GroupCall` returned: its rows, the seconds the call took where it ran, and
    what the judge cache answered its model calls (`judge_counts`)."""

    rows: list[dict[str, Any]]
    seconds: float
    calls: dict[str, int] = field(default_factory=lambda: judge_counts([]))


def judge_counts(records: Iterable[CallRecord]) -> dict[str, int]:
    """`JsonCache.counts()`'s form for some judge attempts: each attempt answered without a
    request of its own is a hit (``seeded`` where a seed cache held it), any other a miss. The
    counts travel with the calls' results, so they add up whichever process made a call."""
    records = list(records)
    hits = sum(r.cached for r in records)
    return {"hits": hits, "seeded": sum(r.seeded for r in records), "misses": len(records) - hits}


@dataclass(frozen=True)
class GroupCall:
    """`score_group(run_id, evaluator, task, candidates, repeat)`, not yet made."""

    run_id: str
    evaluator: Evaluator
    task: Task
    candidates: list[Candidate]
    repeat: int = 0
    population: str = ""  # the group's population where the scores stage splits them

    @property
    def label(self) -> str:
        return f"{self.evaluator.name} {self.task.task_id} {self.population} r{self.repeat}"

    def __call__(self) -> ScoredGroup:
        start = time.monotonic()
        ev, candidates = self.evaluator, self.candidates
        result = ev.judge_group(self.task, candidates, self.repeat)
        rows = group_rows(self.run_id, ev, candidates, self.repeat, result.verdicts)
        return ScoredGroup(rows, time.monotonic() - start, judge_counts(result.records))


def stage_calls(
    run_id: str,
    evaluators: Sequence[Evaluator],
    tasks: Sequence[Task],
    groups: Mapping[tuple[str, str], list[Candidate]],
    repeats: int,
) -> list[GroupCall]:
    """Every call of the scores stage: each evaluator (its `spec.repeats(repeats)` times) over
    every group of `groups` ((task id, population) -> candidates,
    `rollouts.generate.candidates_by_group`). Evaluator-major, so that a serial run, or the
    embedded server's lane taking them in this order, swaps models as rarely as it can; tasks
    in `tasks`' order, a task's populations in `groups`' order."""
    by_task: dict[str, list[str]] = {}
    for task_id, population in groups:
        by_task.setdefault(task_id, []).append(population)
    return [
        GroupCall(run_id, ev, t, groups[(t.task_id, population)], repeat, population)
        for ev in evaluators
        for repeat in range(ev.spec.repeats(repeats))
        for t in tasks
        for population in by_task.get(t.task_id, [])
    ]


# Makes every call and returns what each returned, in call order; a call that raised gives its
# exception there, and the other calls are still made. A scorer may make calls concurrently
# but never changes what a call returns.
Scorer = Callable[[Sequence[GroupCall]], list["ScoredGroup | Exception"]]


def score_serially(calls: Sequence[GroupCall]) -> list[ScoredGroup | Exception]:
    """The `Scorer` that makes one call at a time, in order."""
    results: list[ScoredGroup | Exception] = []
    for call in calls:
        try:
            results.append(call())
        except Exception as err:  # the caller decides what a failed call costs
            results.append(err)
    return results


def run_id_for(settings: Settings, rollouts: pl.DataFrame) -> str:
    """Same evaluator settings on the same candidates -> the same run id."""
    return digest(
        {
            # the failure share decides the exit code, never a score
            "scores": settings.scores.model_dump(mode="json", exclude={"max_failure_share"}),
            "models": {
                n: settings.models[n].model_dump(
                    mode="json", exclude=set(RATE_LIMIT_KEYS | PRICE_KEYS)
                )
                for n in settings.models_called("scores")
            },
            "candidates": rollouts["candidate_id"].sort().to_list(),
        }
    )[:12]


def scores_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema=columns(ScoresSchema)).sort(
        ["evaluator", "task_id", "candidate_id", "repeat"]
    )
    return validate(frame, ScoresSchema, "scores table")
