"""What each probe judge call cost: tokens and latency per attempt, per view.

`CallLog.wrap(evaluator)` is an evaluator that scores exactly as the wrapped one — its
`score_group` calls the LLM judge's own `judge_group` (group judges) or `judge` (pointwise
judges, one candidate at a time), the methods its `score_group`/`score` return the verdicts of,
and keeps the `CallRecord` of every attempt they made. `CallLog.label(evaluator, group, view,
repeat)` files the records made since the last label under that view. `CallLog.frame()` is the
probe calls table (`judgelab.schemas.ProbeCallsSchema`), one row per attempt: tokens as the
endpoint reported them and ``reply_latency_s``, the time the model took to write the reply
(recorded in the judge cache with it, so a resumed run still knows it).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from judgelab.evaluators.base import Candidate, Task, Verdict
from judgelab.schemas import ProbeCallsSchema, validate

CALL_COLUMNS = {
    "evaluator": pl.Utf8,
    "group_id": pl.Utf8,
    "view": pl.Utf8,
    "repeat": pl.Int64,
    "candidate_id": pl.Utf8,
    "attempt": pl.Int64,
    "cached": pl.Boolean,
    "ok": pl.Boolean,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "reply_latency_s": pl.Float64,
}


class CallLog:
    """The call records of every wrapped evaluator, filed by view."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []

    def wrap(self, evaluator: Any) -> RecordingEvaluator:
        return RecordingEvaluator(evaluator, self)

    def add(self, evaluator: str, candidate_id: str | None, records: list[Any]) -> None:
        for attempt, r in enumerate(records):
            self._pending.append(
                {
                    "evaluator": evaluator,
                    "candidate_id": candidate_id,
                    "attempt": attempt,
                    "cached": bool(r.cached),
                    "ok": r.error is None,
                    "prompt_tokens": r.prompt_tokens,
                    "completion_tokens": r.completion_tokens,
                    "reply_latency_s": r.reply_latency_s,
                }
            )

    def label(self, evaluator: str, group_id: str, view: str, repeat: int) -> None:
        """File the records made since the last label (that evaluator's) under this view."""
        mine = [r for r in self._pending if r["evaluator"] == evaluator]
        self._pending = [r for r in self._pending if r["evaluator"] != evaluator]
        self.rows += [{**r, "group_id": group_id, "view": view, "repeat": repeat} for r in mine]

    def frame(self) -> pl.DataFrame:
        frame = pl.DataFrame(self.rows, schema=CALL_COLUMNS).sort(
            ["evaluator", "group_id", "view", "repeat", "candidate_id", "attempt"]
        )
        return validate(frame, ProbeCallsSchema, "probe calls table")


class RecordingEvaluator:
    """An evaluator that scores as the wrapped one and logs its LLM calls (module docstring).
    Every other attribute is the wrapped evaluator's."""

    def __init__(self, inner: Any, log: CallLog) -> None:
        self.inner = inner
        self.log = log

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("inner", "log"):  # copy/pickle probe these
            raise AttributeError(name)
        return getattr(self.inner, name)

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]:
        ev = self.inner
        if hasattr(ev, "judge_group"):  # group judge: one call (and its retries) per group
            result = ev.judge_group(task, candidates, repeat)
            self.log.add(ev.name, None, result.calls)
            return list(result.verdicts)
        if hasattr(ev, "judge"):  # pointwise judge: one call per candidate
            verdicts = []
            for c in candidates:
                result = ev.judge(task, c, repeat)
                self.log.add(ev.name, c.candidate_id, result.calls)
                verdicts += result.verdicts
            return verdicts
        if hasattr(ev, "score_group"):  # not an LLM judge: nothing to log
            return list(ev.score_group(task, candidates, repeat=repeat))
        return [ev.score(task, c, repeat=repeat) for c in candidates]
