"""RULER group judging through OpenPipe ART, with the failure handling ART leaves out.

`RulerJudge.score_group(task, candidates, repeat)` sends all k candidates of a task to ART's
``art.rewards.ruler.ruler`` in one call, prompt and rubric unchanged, and returns one
`Verdict` per candidate in candidate order. What judgelab adds (docs/JUDGES.md):

* with ``spec.shuffle`` the candidates are shown in a seeded random order, new per repeat
  and attempt; each verdict keeps its ``slot`` and the group's ``permutation``;
* ART's trajectory ids are matched back by id, never by list position; an unknown, duplicate
  or missing id is a reply error;
* retries, the out-of-range reward policy and unscored failures of `judgelab.evaluators.llm_judge`.

``latency_s`` on each verdict is the group's judge time (all attempts) divided by k.
`RulerJudge.judge_group` also returns the `CallRecord` of every attempt (raw reply, tokens,
cache hit), so callers can keep replies that could not be parsed.
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from dataclasses import dataclass, replace
from typing import Any

from art.rewards.ruler import TrajectoryScore, ruler

from judgelab.errors import JudgeReplyError
from judgelab.evaluators.llm_judge import (
    JudgeResult,
    LLMJudge,
    classify_failure,
    failure_reason,
    raw_tail,
    request_seed,
    retry_calls,
    score_verdict,
    truncate,
)
from judgelab.evaluators.settings import RulerSettings
from judgelab.evaluators.transport.loop import run_sync
from judgelab.evaluators.transport.provider import CallRecord, call_metadata, judge_call
from judgelab.evaluators.transport.schema import reply_token_budget
from judgelab.verdicts import Candidate, Task, Verdict

log = logging.getLogger(__name__)


@dataclass
class _Outcome:
    """One successful attempt: verdicts in candidate order (latency filled in later)."""

    verdicts: list[Verdict]
    record: CallRecord


class RulerJudge(LLMJudge):
    """Group judge: ART's RULER over all k candidates of a task in one call."""

    protocol = "ruler"
    spec: RulerSettings

    def order(self, task: Task, n: int, repeat: int, attempt: int) -> list[int]:
        """Candidate indices in the order shown to the judge on this attempt."""
        idx = list(range(n))
        if self.spec.shuffle and n > 1:
            material = f"ruler|{self.spec.call.seed}|{task.task_id}|{repeat}|{attempt}"
            seed = int.from_bytes(hashlib.sha256(material.encode()).digest()[:8], "big")
            random.Random(seed).shuffle(idx)
        return idx

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]:
        return self.judge_group(task, candidates, repeat).verdicts

    def judge_group(self, task: Task, candidates: list[Candidate], repeat: int = 0) -> JudgeResult:
        if not candidates:
            return JudgeResult([])
        call = self.spec.call
        records: list[CallRecord] = []
        last: dict[str, Any] = {}
        start = time.perf_counter()

        def attempt_fn(attempt: int) -> _Outcome:
            order = self.order(task, len(candidates), repeat, attempt)
            last["order"] = order
            return run_sync(self._attempt(candidates, order, repeat, attempt, records))

        what = f"ruler {self.name} on {task.task_id} (repeat {repeat})"
        outcome, error, attempts = retry_calls(attempt_fn, call, self._sleep, what)
        share = (time.perf_counter() - start) / len(candidates)
        if outcome is not None:
            verdicts = [_with_latency(v, share) for v in outcome.verdicts]
            return JudgeResult(verdicts, records)
        assert error is not None
        order = last.get("order", list(range(len(candidates))))
        permutation = ",".join(str(candidates[i].sample_index) for i in order)
        slots = {i: s for s, i in enumerate(order)}
        raw = getattr(error, "raw", None) or (records[-1].raw if records else None)
        reason = failure_reason(error, attempts)
        verdicts = [
            Verdict.unscored(
                reason,
                explanation=raw_tail(raw, call.explanation_max_chars),
                latency_s=share,
                slot=slots[i],
                permutation=permutation,
            )
            for i in range(len(candidates))
        ]
        return JudgeResult(verdicts, records)

    async def _attempt(
        self,
        candidates: list[Candidate],
        order: list[int],
        repeat: int,
        attempt: int,
        records: list[CallRecord],
    ) -> _Outcome:
        call = self.spec.call
        shown = [candidates[i] for i in order]
        message_lists = [
            [*c.messages, {"role": "assistant", "content": c.completion}] for c in shown
        ]
        identical = len(message_lists) > 1 and all(m == message_lists[0] for m in message_lists)
        if identical:
            log.info(
                "ruler %s: all %d trajectories identical; ART scores one", self.name, len(shown)
            )
        items = 1 if identical else len(shown)
        max_tokens = call.max_tokens
        if max_tokens is None:
            max_tokens = reply_token_budget(items, call.explanation_max_chars)
        with judge_call(
            self.endpoint,
            self.cache,
            string_max_chars=call.explanation_max_chars,
            array_items=items,
            ids=tuple(str(i) for i in range(1, items + 1)),  # ART's trajectory ids
        ) as record:
            records.append(record)
            try:
                rubric = {"rubric": self.spec.rubric} if self.spec.rubric else {}
                scores = await ruler(
                    message_lists,
                    judge_model=self.litellm_model,
                    **rubric,  # unset: ART's default rubric
                    extra_litellm_params={
                        "temperature": call.temperature,
                        "max_tokens": max_tokens,
                        "seed": request_seed(call.seed, repeat, attempt),
                        "metadata": call_metadata(record),
                    },
                )
            except Exception as err:  # ART/litellm raise many types; classify them all
                raise classify_failure(err, record) from err
        by_slot = _match_ids(scores, len(shown), record.raw)
        permutation = ",".join(str(c.sample_index) for c in shown)
        verdicts: list[Verdict | None] = [None] * len(candidates)
        for slot, original in enumerate(order):
            score = by_slot[slot]
            verdicts[original] = score_verdict(
                score.score,
                call.out_of_range,
                explanation=truncate(score.explanation, call.explanation_max_chars),
                latency_s=0.0,
                slot=slot,
                permutation=permutation,
            )
        return _Outcome([v for v in verdicts if v is not None], record)


def _match_ids(
    scores: list[TrajectoryScore], k: int, raw: str | None
) -> dict[int, TrajectoryScore]:
    """Map ART's trajectory ids ("1".."k") to 0-based slots; any id problem is a reply error."""
    valid = {str(i): i - 1 for i in range(1, k + 1)}
    by_slot: dict[int, TrajectoryScore] = {}
    for s in scores:
        tid = s.trajectory_id.strip()
        if tid not in valid:
            raise JudgeReplyError(
                f"unknown trajectory_id {s.trajectory_id!r} (expected 1..{k})", raw
            )
        slot = valid[tid]
        if slot in by_slot:
            raise JudgeReplyError(f"duplicate trajectory_id {tid!r}", raw)
        by_slot[slot] = s
    missing = [str(i + 1) for i in range(k) if i not in by_slot]
    if missing:
        raise JudgeReplyError(f"missing trajectory_id(s) {', '.join(missing)}", raw)
    return by_slot


def _with_latency(verdict: Verdict, latency_s: float) -> Verdict:
    return replace(verdict, latency_s=latency_s)
