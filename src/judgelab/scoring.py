"""The scores stage's logic: every evaluator scores every group; one row per verdict.

Each evaluator (`judgelab.evaluators.base.Evaluator`, built by the evaluator registry) scores
one task group per `score_group` call. Deterministic evaluators run once (repeat 0); LLM
judges run `scores.repeats` times (`spec.repeats`). Whatever happens to a candidate becomes a
row — scored, or unscored with its reason.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from judgelab.cache import digest
from judgelab.config import PRICE_KEYS, RATE_LIMIT_KEYS, Settings
from judgelab.evaluators.base import Evaluator
from judgelab.schemas import ScoresSchema, columns, validate
from judgelab.verdicts import Candidate, Task, Verdict

EXPLANATION_LIMIT = 2000


def judge_names(settings: Settings) -> list[str]:
    """Registry names of the models the configured LLM judges need, in config order."""
    names = [ev.judge_model for ev in settings.scores.evaluators if ev.judge_model is not None]
    return list(dict.fromkeys(names))


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
    }


def score_group(
    run_id: str, ev: Evaluator, task: Task, candidates: list[Candidate], repeat: int
) -> list[dict[str, Any]]:
    """Rows for one (evaluator, task group, repeat)."""
    verdicts = ev.score_group(task, candidates, repeat=repeat)
    if len(verdicts) != len(candidates):
        raise RuntimeError(
            f"{ev.name} returned {len(verdicts)} verdicts for {len(candidates)} candidates"
        )
    return [_row(run_id, ev, c, repeat, v) for c, v in zip(candidates, verdicts, strict=True)]


def run_id_for(settings: Settings, rollouts: pl.DataFrame) -> str:
    """Same evaluator settings on the same candidates -> the same run id."""
    return digest(
        {
            "scores": settings.scores.model_dump(mode="json"),
            "models": {
                n: settings.models[n].model_dump(
                    mode="json", exclude=set(RATE_LIMIT_KEYS | PRICE_KEYS)
                )
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
