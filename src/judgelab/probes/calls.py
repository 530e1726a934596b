"""What each probe judge call cost: tokens and latency per attempt, per view.

`record_calls(evaluator, group_id, view, repeat)` is an evaluator that scores exactly as the
wrapped one — its `score_group` calls the LLM judge's own `judge_group` (RULER) or `judge`
(rubric, per candidate, as many at once as its own `score_group` would), the methods whose
verdicts `score_group` / `score_one` return — and keeps the `CallRecord` of every attempt
they made as rows of the probe calls table (`judgelab.schemas.ProbeCallsSchema`) in
`.calls`: tokens as the endpoint reported them and ``reply_latency_s``, the time the model
took to write the reply (kept in the judge cache with it, so a cached reply still says what
it cost). One wrapper per view: the rows travel back with the view's scores, so views may
run concurrently or in other processes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
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

    def _log(self, candidate_id: str | None, records: list[Any]) -> None:
        for attempt, r in enumerate(records):
            self.calls.append(
                {
                    "evaluator": self.name,
                    **self.where,
                    "candidate_id": candidate_id,
                    "attempt": attempt,
                    "cached": bool(r.cached),
                    "ok": r.error is None,
                    "prompt_tokens": r.prompt_tokens,
                    "completion_tokens": r.completion_tokens,
                    "reply_latency_s": r.reply_latency_s,
                }
            )

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]:
        ev = self.inner
        if hasattr(ev, "judge_group"):  # group judge: one call (and its retries) per group
            result = ev.judge_group(task, candidates, repeat)
            self._log(None, result.calls)
            return list(result.verdicts)
        if hasattr(ev, "judge"):  # pointwise judge: one call per candidate, as concurrent
            workers = min(getattr(ev, "concurrency", 1), len(candidates))  # as its score_group

            def judge(c: Candidate) -> Any:
                return ev.judge(task, c, repeat)

            if workers > 1:
                with ThreadPoolExecutor(max_workers=workers) as pool:
                    results = list(pool.map(judge, candidates))
            else:
                results = [judge(c) for c in candidates]
            for c, result in zip(candidates, results, strict=True):
                self._log(c.candidate_id, result.calls)
            return [v for result in results for v in result.verdicts]
        return list(ev.score_group(task, candidates, repeat=repeat))  # no model call to log


def record_calls(evaluator: Evaluator, group_id: str, view: str, repeat: int) -> RecordingEvaluator:
    """`evaluator` for one view, logging its calls under (group_id, view, repeat)."""
    return RecordingEvaluator(evaluator, group_id, view, repeat)


def calls_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    """The probe calls table from the views' call rows."""
    frame = pl.DataFrame(rows, schema=columns(ProbeCallsSchema)).sort(
        ["evaluator", "group_id", "view", "repeat", "candidate_id", "attempt"]
    )
    return validate(frame, ProbeCallsSchema, "probe calls table")
