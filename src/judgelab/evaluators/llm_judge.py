"""What every LLM judge shares: its endpoint and cache, retries, the reward policy, failures.

`LLMJudge` holds the evaluator's settings, its endpoint (registered with the ``judgelab``
litellm provider, `judgelab.evaluators.transport.provider`), the judge cache and the sleep used
between retries. A judge's attempt is retried by `retry_calls`: a wrong score count, invalid
JSON or a schema mismatch, an empty reply (`JudgeReplyError`) and transient transport errors
(429, 5xx, timeouts, connection errors) up to ``spec.call.retries`` times with exponential
backoff (``spec.call.backoff_s * 2**(n-1)``, or the server's Retry-After if longer); a
rejected request (4xx) is not. Each attempt sends a new seed (`request_seed`), so a cached bad
reply is never replayed. When every attempt fails, the candidates are unscored with
`failure_reason` and the tail of the last raw reply: a failed call never becomes a score of 0.

Reward policy (`score_verdict`): a finite raw score outside [0, 1] sets ``out_of_range`` and
keeps ``raw_score``; ``spec.call.out_of_range`` then leaves the candidate unscored
(``"unscore"``, reason ``"out of range: raw score 184"``) or clips it into [0, 1]
(``"clip"``). A non-finite score is always unscored. The decision is per candidate.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic

from judgelab.cache import JsonCache
from judgelab.errors import (
    JUDGE_CALL_FAILED,
    JUDGE_REPLY_ERROR,
    JudgelabError,
    JudgeReplyError,
    ModelError,
    TransientError,
)
from judgelab.evaluators.base import Evaluator
from judgelab.evaluators.settings import JudgeCallSettings, LLMJudgeSettings
from judgelab.evaluators.transport.provider import CallRecord, prepare, register_endpoint
from judgelab.models.endpoint import Endpoint
from judgelab.models.ratelimit import retry_delay
from judgelab.verdicts import Verdict

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
    """What every LLM judge holds besides its settings: its endpoint, registered with the
    judgelab litellm provider as `litellm_model`, the judge cache and the sleep used between
    retries."""

    spec: LLMJudgeSettings

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
