"""The scores stage's logic: every evaluator scores every group; one row per verdict.

Evaluators are built from their settings by `build_evaluator`; group evaluators (RULER)
see a whole group per call, pointwise ones (rules, execution, rubric) one candidate at a
time. Deterministic evaluators run once (repeat 0); LLM judges run `scores.repeats` times.
Whatever happens to a candidate becomes a row — scored, or unscored with its reason.
"""

from __future__ import annotations

from typing import Any, Protocol

import polars as pl

from judgelab.cache import JsonCache, digest
from judgelab.config import (
    RATE_LIMIT_KEYS,
    ExecutionEvaluator,
    FormatEvaluator,
    RubricEvaluator,
    RulerEvaluator,
    Settings,
    SyntaxEvaluator,
)
from judgelab.evaluators.base import Candidate, Task, Verdict
from judgelab.models.endpoint import Endpoint
from judgelab.schemas import ScoresSchema, columns, validate

EXPLANATION_LIMIT = 2000


class Evaluator(Protocol):
    name: str
    protocol: str


def judge_names(settings: Settings) -> list[str]:
    """Registry names of the models the configured LLM judges need, in config order."""
    names = [
        ev.judge
        for ev in settings.scores.evaluators
        if isinstance(ev, RulerEvaluator | RubricEvaluator)
    ]
    return list(dict.fromkeys(names))


def build_evaluator(spec: Any, endpoints: dict[str, Endpoint], cache: JsonCache | None) -> Any:
    # Imported here: each evaluator family pulls in heavy dependencies (litellm/ART).
    if isinstance(spec, FormatEvaluator):
        from judgelab.evaluators.rules import FormatJudge

        return FormatJudge(spec)
    if isinstance(spec, SyntaxEvaluator):
        from judgelab.evaluators.rules import SyntaxJudge

        return SyntaxJudge(spec)
    if isinstance(spec, ExecutionEvaluator):
        from judgelab.evaluators.execution import ExecutionJudge

        return ExecutionJudge(spec)
    if isinstance(spec, RulerEvaluator):
        from judgelab.evaluators.ruler import RulerJudge

        return RulerJudge(spec, endpoints[spec.judge], cache)
    if isinstance(spec, RubricEvaluator):
        from judgelab.evaluators.rubric import RubricJudge

        return RubricJudge(spec, endpoints[spec.judge], cache)
    raise TypeError(f"no evaluator for {type(spec).__name__}")


def repeats_for(spec: Any, settings: Settings) -> int:
    return settings.scores.repeats if isinstance(spec, RulerEvaluator | RubricEvaluator) else 1


def _row(
    run_id: str, ev: Any, spec: Any, cand: Candidate, repeat: int, v: Verdict
) -> dict[str, Any]:
    explanation = v.explanation[:EXPLANATION_LIMIT] if v.explanation else v.explanation
    return {
        "run_id": run_id,
        "task_id": cand.task_id,
        "candidate_id": cand.candidate_id,
        "evaluator": spec.name,
        "protocol": ev.protocol,
        "judge": getattr(spec, "judge", None),
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
    }


def score_group(
    run_id: str, ev: Any, spec: Any, task: Task, candidates: list[Candidate], repeat: int
) -> list[dict[str, Any]]:
    """Rows for one (evaluator, task group, repeat)."""
    if hasattr(ev, "score_group"):
        verdicts = ev.score_group(task, candidates, repeat=repeat)
        if len(verdicts) != len(candidates):
            raise RuntimeError(
                f"{spec.name} returned {len(verdicts)} verdicts for {len(candidates)} candidates"
            )
    else:
        verdicts = [ev.score(task, c, repeat=repeat) for c in candidates]
    return [_row(run_id, ev, spec, c, repeat, v) for c, v in zip(candidates, verdicts, strict=True)]


def run_id_for(settings: Settings, rollouts: pl.DataFrame) -> str:
    """Same evaluator settings on the same candidates -> the same run id."""
    return digest(
        {
            "scores": settings.scores.model_dump(mode="json"),
            "models": {
                n: settings.models[n].model_dump(mode="json", exclude=set(RATE_LIMIT_KEYS))
                for n in judge_names(settings)
            },
            "candidates": rollouts["candidate_id"].sort().to_list(),
        }
    )[:12]


def scores_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema=columns(ScoresSchema)).sort(
        ["evaluator", "task_id", "candidate_id", "repeat"]
    )
    return validate(frame, ScoresSchema, "scores table")
