"""Every LLM judge call: its request seed, retries, failures, call records and reward policy.

`LLMJudge` owns the judge call; a kind supplies only what differs (`ruler.py`, `rubric.py`):
`_reply_shape` (how many scored items its reply holds) and `_ask` (the request, and the reply
parsed into one `Score` per candidate shown). A group judge (``group = True``: RULER) sends all
k candidates of a task in one call and each verdict keeps its ``slot`` and the group's
``permutation``; a pointwise judge sends one call per candidate, up to the endpoint's
concurrency at once. `judge_group` returns the verdicts with every call's attempts
(`judgelab.evaluators.base.JudgeResult`); `score_group` returns the verdicts.

The endpoint is registered with the ``judgelab`` litellm provider
(`judgelab.evaluators.transport.provider`), which answers from the judge cache when it can.
A call is retried by `retry_calls`: a wrong score count, invalid JSON or a schema mismatch,
an empty reply (`JudgeReplyError`) and transient transport errors (429, 5xx, timeouts,
connection errors) up to ``spec.call.retries`` times with exponential backoff
(``spec.call.backoff_s * 2**(n-1)``, or the server's Retry-After if longer); a rejected
request (4xx) is not. Each attempt sends a new seed (`request_seed`), so a cached bad reply is
never replayed. When every attempt fails, the candidates are unscored with `failure_reason`
and the tail of the last raw reply: a failed call never becomes a score of 0. ``latency_s``
on each verdict is the call's time (all attempts) divided by the candidates it judged.

Reward policy (`score_verdict`): a finite raw score outside [0, 1] sets ``out_of_range`` and
keeps ``raw_score``; ``spec.call.out_of_range`` then leaves the candidate unscored
(``"unscore"``, reason ``"out of range: raw score 184"``) or clips it into [0, 1]
(``"clip"``). A non-finite score is always unscored. The decision is per candidate.
"""

from __future__ import annotations

import logging
import math
import time
from abc import abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, ClassVar, TypeVar

import pydantic

from judgelab.cache import JsonCache
from judgelab.config.evaluators import JudgeCallSettings, LLMJudgeSettings
from judgelab.errors import (
    JUDGE_CALL_FAILED,
    JUDGE_REPLY_ERROR,
    JudgelabError,
    JudgeReplyError,
    ModelError,
    TransientError,
)
from judgelab.evaluators.base import Evaluator, JudgeCall, JudgeResult
from judgelab.evaluators.transport.loop import run_sync
from judgelab.evaluators.transport.provider import (
    CallRecord,
    call_metadata,
    judge_call,
    prepare,
    register_endpoint,
)
from judgelab.evaluators.transport.schema import reply_token_budget
from judgelab.models.endpoint import Endpoint
from judgelab.models.ratelimit import retry_delay
from judgelab.verdicts import Candidate, Task, Verdict

log = logging.getLogger(__name__)
_T = TypeVar("_T")


@dataclass(frozen=True)
class Score:
    """One candidate's score and explanation as the judge wrote them (no policy applied)."""

    score: float
    explanation: str | None


@dataclass(frozen=True)
class ReplyShape:
    """What one call's reply holds: `items` scored objects (they set the output-token budget),
    and the bounds the transport writes into the reply schema: the array's length and the
    ids its items may carry (None: no bound)."""

    items: int
    array_items: int | None = None
    ids: tuple[str, ...] | None = None


def truncate(text: str | None, max_chars: int) -> str | None:
    if text is None:
        return None
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def raw_tail(text: str | None, max_chars: int) -> str | None:
    """The last ``max_chars`` characters of a reply (where a truncated JSON reply went wrong)."""
    if not text:
        return None
    return text if len(text) <= max_chars else "…" + text[-(max_chars - 1) :]


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


class LLMJudge(Evaluator):
    """An evaluator that asks the model named by its settings' `judge` (module docstring).

    Holds the endpoint, registered with the judgelab litellm provider as `litellm_model`, the
    judge cache and the sleep used between retries."""

    spec: LLMJudgeSettings
    # True: one call judges all candidates of a group together, and each verdict keeps the
    # slot it was shown at and the order shown; False: one call per candidate.
    group: ClassVar[bool]

    def __init__(
        self,
        spec: LLMJudgeSettings,
        endpoint: Endpoint,
        cache: JsonCache | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(spec)
        self.endpoint = endpoint
        self.cache = cache
        self._sleep = sleep
        self.litellm_model = register_endpoint(endpoint)
        prepare(endpoint)

    def __setstate__(self, state: dict) -> None:
        # Unpickled in another process (a Dask worker): litellm there has not heard of the
        # endpoint yet.
        self.__dict__.update(state)
        register_endpoint(self.endpoint)
        prepare(self.endpoint)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, endpoint={self.endpoint!r})"

    @property
    def call_settings(self) -> JudgeCallSettings:
        return self.spec.call  # type: ignore[attr-defined, no-any-return]  # every kind has one

    # ----------------------------------------------------------------- what a kind provides

    @abstractmethod
    def _reply_shape(self, shown: list[Candidate]) -> ReplyShape:
        """What the reply to a call showing `shown` holds."""

    @abstractmethod
    async def _ask(
        self, task: Task, shown: list[Candidate], sampling: dict[str, Any], record: CallRecord
    ) -> list[Score]:
        """Send one request (`sampling`: litellm's temperature, max_tokens, seed and metadata)
        and return one `Score` per candidate in `shown`'s order; an unusable reply raises."""

    def order(self, task: Task, n: int, repeat: int, attempt: int) -> list[int]:
        """Candidate indices in the order shown to the judge on this attempt: as given."""
        return list(range(n))

    # ----------------------------------------------------------------- the judge call

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]:
        return self.judge_group(task, candidates, repeat).verdicts

    def judge_group(self, task: Task, candidates: list[Candidate], repeat: int = 0) -> JudgeResult:
        """The verdicts in candidate order with every call's attempts. ``repeat`` changes the
        request seed, so a repeat samples the judge again instead of replaying a reply."""
        if not candidates:
            return JudgeResult([])
        batches = [candidates] if self.group else [[c] for c in candidates]
        workers = min(self.endpoint.concurrency, len(batches))
        if workers <= 1:
            results = [self._call(task, batch, repeat) for batch in batches]
        else:
            with ThreadPoolExecutor(max_workers=workers) as pool:
                results = list(pool.map(lambda b: self._call(task, b, repeat), batches))
        verdicts = [v for result in results for v in result.verdicts]
        return JudgeResult(verdicts, [call for result in results for call in result.calls])

    def _call(self, task: Task, candidates: list[Candidate], repeat: int) -> JudgeResult:
        """One judge call over `candidates`, retried (module docstring)."""
        records: list[CallRecord] = []
        orders: list[list[int]] = []
        start = time.perf_counter()

        def attempt_fn(attempt: int) -> list[Verdict]:
            orders.append(self.order(task, len(candidates), repeat, attempt))
            return run_sync(self._attempt(task, candidates, orders[-1], repeat, attempt, records))

        subject = task.task_id if self.group else candidates[0].candidate_id
        what = f"{self.protocol} {self.name} on {subject} (repeat {repeat})"
        verdicts, error, attempts = retry_calls(attempt_fn, self.call_settings, self._sleep, what)
        if verdicts is None:
            assert error is not None
            verdicts = self._unscored(error, attempts, candidates, orders[-1], records)
        share = (time.perf_counter() - start) / len(candidates)
        call = JudgeCall(None if self.group else candidates[0].candidate_id, records)
        return JudgeResult([replace(v, latency_s=share) for v in verdicts], [call])

    async def _attempt(
        self,
        task: Task,
        candidates: list[Candidate],
        order: list[int],
        repeat: int,
        attempt: int,
        records: list[CallRecord],
    ) -> list[Verdict]:
        call = self.call_settings
        shown = [candidates[i] for i in order]
        shape = self._reply_shape(shown)
        max_tokens = call.max_tokens
        if max_tokens is None:
            max_tokens = reply_token_budget(shape.items, call.explanation_max_chars)
        with judge_call(
            self.endpoint,
            self.cache,
            string_max_chars=call.explanation_max_chars,
            array_items=shape.array_items,
            ids=shape.ids,
        ) as record:
            records.append(record)
            sampling = {
                "temperature": call.temperature,
                "max_tokens": max_tokens,
                "seed": request_seed(call.seed, repeat, attempt),
                "metadata": call_metadata(record),
            }
            try:
                scores = await self._ask(task, shown, sampling, record)
            except JudgeReplyError:
                raise
            except Exception as err:  # ART/litellm/pydantic raise many types; classify them all
                raise classify_failure(err, record) from err
        return self._verdicts(scores, shown, order)

    def _verdicts(
        self, scores: list[Score], shown: list[Candidate], order: list[int]
    ) -> list[Verdict]:
        """The reward policy on each score, back in candidate order (latency set later)."""
        call = self.call_settings
        permutation = ",".join(str(c.sample_index) for c in shown) if self.group else None
        verdicts: list[Verdict] = [None] * len(order)  # type: ignore[list-item]
        for slot, original in enumerate(order):
            verdicts[original] = score_verdict(
                scores[slot].score,
                call.out_of_range,
                explanation=truncate(scores[slot].explanation, call.explanation_max_chars),
                latency_s=0.0,
                slot=slot if self.group else None,
                permutation=permutation,
            )
        return verdicts

    def _unscored(
        self,
        error: JudgelabError,
        attempts: int,
        candidates: list[Candidate],
        order: list[int],
        records: list[CallRecord],
    ) -> list[Verdict]:
        """Every candidate of a call whose attempts all failed: the reason and the tail of the
        last raw reply, and (group judges) the slot and order of the last attempt."""
        raw = getattr(error, "raw", None) or (records[-1].raw if records else None)
        explanation = raw_tail(raw, self.call_settings.explanation_max_chars)
        permutation = None
        if self.group:
            permutation = ",".join(str(candidates[i].sample_index) for i in order)
        slots = {i: s for s, i in enumerate(order)}
        return [
            Verdict.unscored(
                failure_reason(error, attempts),
                explanation=explanation,
                slot=slots[i] if self.group else None,
                permutation=permutation,
            )
            for i in range(len(candidates))
        ]
