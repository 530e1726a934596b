"""What each probe judge call cost: tokens and latency per attempt, per view.

`record_calls(evaluator, group_id, view, repeat)` is an evaluator that scores exactly as the
wrapped one — its `score_group` returns the verdicts of the wrapped one's `judge_group`, the
method every evaluator's `score_group` agrees with — and keeps the `CallRecord` of every
attempt of every judge call made (none for an evaluator that calls no model) as rows of the
probe calls table (`judgelab.schemas.ProbeCallsSchema`) in `.calls`: tokens as the endpoint
reported them and ``reply_latency_s``, the time the model took to write the reply (kept in
the judge cache with it, so a cached reply still says what it cost). One wrapper per view:
the rows travel back with the view's scores, so views may run concurrently or in other
processes.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from judgelab.evaluators.base import Evaluator
from judgelab.schemas import ProbeCallsSchema, columns, validate
from judgelab.verdicts import Candidate, Task, Verdict


class RecordingEvaluator(Evaluator):
    """An evaluator that scores as the wrapped one (same settings, name and protocol) and
    logs its LLM calls (module docstring)."""

    def __init__(self, inner: Evaluator, group_id: str, view: str, repeat: int) -> None:
        super().__init__(inner.spec)
        self.protocol = inner.protocol  # type: ignore[misc]  # the wrapped one's, per instance
        self.inner = inner
        self.where = {"group_id": group_id, "view": view, "repeat": repeat}
        self.calls: list[dict[str, Any]] = []

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]:
        result = self.inner.judge_group(task, candidates, repeat)
        for call in result.calls:
            for attempt, r in enumerate(call.attempts):
                self.calls.append(
                    {
                        "evaluator": self.name,
                        **self.where,
                        "candidate_id": call.candidate_id,
                        "attempt": attempt,
                        "cached": bool(r.cached),
                        "ok": r.error is None,
                        "prompt_tokens": r.prompt_tokens,
                        "completion_tokens": r.completion_tokens,
                        "reply_latency_s": r.reply_latency_s,
                    }
                )
        return list(result.verdicts)


def record_calls(evaluator: Evaluator, group_id: str, view: str, repeat: int) -> RecordingEvaluator:
    """`evaluator` for one view, logging its calls under (group_id, view, repeat)."""
    return RecordingEvaluator(evaluator, group_id, view, repeat)


def calls_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The probe calls table from the views' call rows."""
    frame = pl.DataFrame(rows, schema=columns(ProbeCallsSchema)).sort(
        ["evaluator", "group_id", "view", "repeat", "candidate_id", "attempt"]
    )
    return validate(frame, ProbeCallsSchema, "probe calls table")
