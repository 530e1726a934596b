"""RULER group judging through OpenPipe ART, with the failure handling ART leaves out.

`RulerJudge.score_group(task, candidates, repeat)` returns one `Verdict` per candidate, in
candidate order. The judge prompt and rubric are ART's own: every call goes through
``art.rewards.ruler.ruler`` unchanged, whose ``litellm.acompletion`` reaches our endpoint through
the ``judgelab`` litellm provider (`judgelab.evaluators.transport`). What judgelab adds:

* **Shuffling.** With ``spec.shuffle`` the candidates are shown in a seeded random order (seed
  from ``spec.call.seed``, task id, repeat and attempt), so position bias can be measured.
  Every verdict stores ``permutation`` (the candidates' ``sample_index`` values in the order
  shown, e.g. ``"2,0,3,1"``) and its own ``slot`` (0-based position shown).
* **Matching by id.** ART numbers trajectories ``"1".."k"`` in the order passed; scores are
  mapped back through ``trajectory_id`` — never list position. An unknown, duplicate or
  missing id is a reply error.
* **Retries.** A wrong score count (ART's ValueError), invalid JSON or a schema mismatch
  (pydantic ValidationError), an empty reply and transient transport errors (429, 5xx,
  timeouts, connection errors) are retried up to ``spec.call.retries`` times with exponential
  backoff (``spec.call.backoff_s * 2**(n-1)``, or the server's Retry-After if longer). Each
  attempt uses a new request seed (``spec.call.seed + 1000 * repeat + attempt``) and a new
  shuffle, so a cached bad reply is never replayed. A rejected request (4xx) is not retried.
  When every attempt fails, every candidate is ``Verdict.unscored`` with the reason and the
  tail of the last raw reply in ``explanation``. A failed call never becomes a score of 0.
* **Reward policy for out-of-range scores.** ART does not range-check; small judges return
  -5, 7 or 184, and the experiment saw 2.0. A finite raw score outside [0, 1] sets
  ``out_of_range=True`` and keeps ``raw_score``; then ``spec.call.out_of_range``:
  ``"unscore"`` (default) leaves the candidate unscored with reason
  ``"out of range: raw score 184"``; ``"clip"`` scores it with the value clipped into [0, 1].
  A non-finite score (NaN, ±inf) is always unscored. This is a per-candidate decision: the
  rest of the group keeps its scores.
* **Identical trajectories.** When all candidates are identical ART sends one trajectory and
  copies its single score to all ids ``"1".."k"``; we bound the reply to one item then, and
  every candidate gets that score.

``latency_s`` on each verdict is the group's judge time (all attempts) divided by k.
`RulerJudge.judge_group` returns the verdicts together with the `CallRecord` of every attempt
(raw reply text, latency, tokens, cache hit), so callers can store raw replies even when they
could not be parsed.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

import pydantic
from art.rewards.ruler import TrajectoryScore, ruler

from judgelab.cache import JsonCache
from judgelab.config import JudgeCallSettings, RulerEvaluator
from judgelab.errors import (
    JUDGE_CALL_FAILED,
    JUDGE_REPLY_ERROR,
    JudgelabError,
    JudgeReplyError,
    ModelError,
    TransientError,
)
from judgelab.evaluators.transport import (
    CallRecord,
    call_metadata,
    judge_call,
    raw_tail,
    register_endpoint,
    reply_token_budget,
    run_sync,
)
from judgelab.models.endpoint import Endpoint
from judgelab.models.ratelimit import retry_delay
from judgelab.types import Candidate, Task, Verdict

log = logging.getLogger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True)
class JudgeResult:
    """Verdicts in candidate order plus one CallRecord per attempt made."""

    verdicts: list[Verdict]
    calls: list[CallRecord] = field(default_factory=list)


def truncate(text: str | None, max_chars: int) -> str | None:
    if text is None:
        return None
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def score_verdict(
    raw: float,
    policy: str,
    *,
    explanation: str | None,
    latency_s: float,
    slot: int | None = None,
    permutation: str | None = None,
) -> Verdict:
    """Apply the reward policy (module docstring) to one raw judge score."""
    extra: dict[str, Any] = {
        "explanation": explanation,
        "latency_s": latency_s,
        "slot": slot,
        "permutation": permutation,
    }
    if not math.isfinite(raw):
        return Verdict.unscored(f"non-finite raw score {raw}", raw_score=raw, **extra)
    if 0.0 <= raw <= 1.0:
        return Verdict.scored(raw, raw_score=raw, **extra)
    if policy == "clip":
        return Verdict.scored(min(1.0, max(0.0, raw)), raw_score=raw, out_of_range=True, **extra)
    return Verdict.unscored(
        f"out of range: raw score {raw:g}", raw_score=raw, out_of_range=True, **extra
    )


def request_seed(seed: int, repeat: int, attempt: int) -> int:
    """The sampling seed sent to the judge: new per repeat and per retry (retries <= 10)."""
    return seed + 1000 * repeat + attempt


def failure_reason(error: JudgelabError, attempts: int) -> str:
    kind = JUDGE_REPLY_ERROR if isinstance(error, JudgeReplyError) else JUDGE_CALL_FAILED
    tries = "attempt" if attempts == 1 else "attempts"
    return f"{kind} after {attempts} {tries}: {error}"


def retry_calls(
    attempt_fn: Callable[[int], _T],
    call: JudgeCallSettings,
    sleep: Callable[[float], None],
    what: str,
) -> tuple[_T | None, JudgelabError | None, int]:
    """Run ``attempt_fn(attempt)`` until it succeeds or the retries are spent.

    Returns (outcome or None, last error or None, attempts made). TransientError (which includes
    JudgeReplyError) is retried; any other JudgelabError stops at once.
    """
    error: JudgelabError | None = None
    attempts = 0
    for attempt in range(call.retries + 1):
        if attempt:
            delay = retry_delay(attempt, call.backoff_s, error)
            log.info(
                "%s: retry %d/%d in %.2f s after: %s", what, attempt, call.retries, delay, error
            )
            sleep(delay)
        attempts += 1
        try:
            return attempt_fn(attempt), None, attempts
        except TransientError as err:
            error = err
        except JudgelabError as err:
            error = err
            break
    log.warning("%s: unscored after %d attempt(s): %s", what, attempts, error)
    return None, error, attempts


@dataclass
class _Outcome:
    """One successful attempt: verdicts in candidate order (latency filled in later)."""

    verdicts: list[Verdict]
    record: CallRecord


def classify_failure(err: Exception, record: CallRecord) -> JudgelabError:
    """Turn what ART/litellm raised into our typed error, preferring the transport's own."""
    if record.error is not None:
        return record.error  # litellm wraps transport errors; the record has the real one
    if record.raw is not None and not record.raw.strip():
        return JudgeReplyError("empty reply", raw=record.raw)
    if isinstance(err, pydantic.ValidationError):
        first = err.errors()[0] if err.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        msg = first.get("msg", str(err))
        return JudgeReplyError(
            f"invalid JSON or schema mismatch ({err.error_count()} error(s); "
            f"{where or '<root>'}: {msg})",
            raw=record.raw,
        )
    if isinstance(err, ValueError):  # ART: wrong number of scores
        return JudgeReplyError(str(err), raw=record.raw)
    return ModelError(f"judge call failed: {err.__class__.__name__}: {err}")


class LLMJudge:
    """What every LLM judge holds: its settings, its endpoint (registered with the judgelab
    litellm provider), the judge cache and the sleep used between retries."""

    protocol: str

    def __init__(
        self,
        spec: Any,
        endpoint: Endpoint,
        cache: JsonCache | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.spec = spec
        self.name: str = spec.name
        self.endpoint = endpoint
        self.cache = cache
        self._sleep = sleep
        self.judge_model = register_endpoint(endpoint)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, endpoint={self.endpoint!r})"


class RulerJudge(LLMJudge):
    """Group judge: ART's RULER over all k candidates of a task in one call."""

    protocol = "ruler"
    spec: RulerEvaluator

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
                    judge_model=self.judge_model,
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
