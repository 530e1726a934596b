"""Client-side limits for one endpoint: concurrency, requests and tokens per window, 429 pauses.

Every HTTP request judgelab sends to an endpoint (policy completions in `models.client`,
judge calls in `evaluators.transport`) passes through the endpoint's `RateLimiter`, shared
by all threads and the judge event loop of this process:

- `max_concurrency`: at most this many requests in flight at once;
- `requests_per_minute`: at most this many requests in any sliding window of
  `Limits.window_s` (60 s) seconds. A request counts from its start until `window_s` after
  it *finished*: a server counts it on arrival, somewhere in between, and so never sees more
  than the limit in any of its own windows;
- `tokens_per_minute`: the tokens of the requests started in any window stay under the
  budget. A request reserves an estimate before it is sent (prompt characters / 4 plus its
  `max_tokens`) and the reservation is corrected to the usage the server reports. A single
  request larger than the whole budget waits for an empty window and then goes alone.
- a 429 with `Retry-After` pauses *every* request to the endpoint until then (`pause`), so
  concurrent callers do not keep hammering a server that asked for quiet; the caller that got
  the 429 retries under its own bounded retry policy.

Limits are a client-side courtesy to the server, not a guarantee against 429s: another client
of the same account, or a server that counts differently, can still refuse; those 429s are
retried like any transient failure. None of this changes any output, so none of it enters a
cache key or a run id.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from judgelab.config import DEFAULT_ENDPOINT_CONCURRENCY
from judgelab.errors import RateLimitedError

WINDOW_S = 60.0
RETRY_AFTER_CAP_S = 120.0  # a longer Retry-After is obeyed only up to this
_POLL_S = 0.02  # longest sleep while waiting for a free concurrency slot


@dataclass(frozen=True)
class Limits:
    max_concurrency: int | None = None
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    window_s: float = WINDOW_S  # "per minute" means per this window (tests shorten it)

    @property
    def concurrency(self) -> int:
        """How many requests judgelab keeps in flight at most: the limit of a stage's lane
        (judgelab.flows.fanout) and of a pointwise judge's pool."""
        return self.max_concurrency or DEFAULT_ENDPOINT_CONCURRENCY

    @property
    def unlimited(self) -> bool:
        return (
            self.max_concurrency is None
            and self.requests_per_minute is None
            and (self.tokens_per_minute is None)
        )


class _Entry:
    """One admitted request: when it finished (None while in flight) and its tokens."""

    __slots__ = ("finished", "tokens")

    def __init__(self, tokens: float) -> None:
        self.finished: float | None = None
        self.tokens = tokens


class _Grant:
    """One admitted request: its token reservation, corrected by `used`."""

    def __init__(self, entry: _Entry) -> None:
        self._entry = entry

    def used(self, tokens: int | None) -> None:
        if tokens is not None and tokens >= 0:
            self._entry.tokens = float(tokens)


class RateLimiter:
    """Thread-safe limiter with blocking (`slot`) and asyncio (`aslot`) entry points."""

    def __init__(self, limits: Limits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self.window_s = limits.window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._in_flight = 0
        self._entries: list[_Entry] = []  # requests in flight or finished within the window
        self._paused_until = 0.0
        self.waited_s = 0.0  # total time callers spent waiting here (for reports)

    def pause(self, seconds: float) -> None:
        """Hold every new request for `seconds` (a server's Retry-After)."""
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + max(0.0, seconds))

    def _try_admit(self, tokens: int) -> tuple[float, _Entry | None]:
        """(0, entry) when admitted now, else (seconds to wait before trying again, None)."""
        lim = self.limits
        with self._lock:
            now = self._clock()
            if now < self._paused_until:
                return self._paused_until - now, None
            horizon = now - self.window_s
            self._entries = [e for e in self._entries if e.finished is None or e.finished > horizon]
            if lim.max_concurrency is not None and self._in_flight >= lim.max_concurrency:
                return _POLL_S, None
            # when each counted request stops counting: window_s after it finished
            # (a request still in flight counts as finishing now, at the earliest)
            frees = sorted(
                ((e.finished if e.finished is not None else now) + self.window_s, e.tokens)
                for e in self._entries
            )
            if lim.requests_per_minute is not None and len(frees) >= lim.requests_per_minute:
                return frees[len(frees) - lim.requests_per_minute][0] - now, None
            if lim.tokens_per_minute is not None and frees:
                budget = lim.tokens_per_minute - min(tokens, lim.tokens_per_minute)
                total = sum(used for _, used in frees)
                if total > budget:
                    for free_at, used in frees:  # wait until enough of the window expires
                        total -= used
                        if total <= budget:
                            return free_at - now, None
            entry = _Entry(float(tokens))
            self._entries.append(entry)
            self._in_flight += 1
            return 0.0, entry

    def _waited(self, since: float) -> None:
        with self._lock:
            self.waited_s += self._clock() - since

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            self._in_flight -= 1
            entry.finished = self._clock()

    @contextlib.contextmanager
    def slot(self, tokens: int = 0) -> Iterator[_Grant]:
        """Block until a request estimated at `tokens` may start; hold it while in flight."""
        start = self._clock()
        while True:
            wait, entry = self._try_admit(tokens)
            if entry is not None:
                break
            time.sleep(min(max(wait, 0.001), 1.0))
        self._waited(start)
        try:
            yield _Grant(entry)
        finally:
            self._release(entry)

    @contextlib.asynccontextmanager
    async def aslot(self, tokens: int = 0) -> AsyncIterator[_Grant]:
        """`slot` for coroutines: waits with asyncio.sleep, never blocking the loop."""
        start = self._clock()
        while True:
            wait, entry = self._try_admit(tokens)
            if entry is not None:
                break
            await asyncio.sleep(min(max(wait, 0.001), 1.0))
        self._waited(start)
        try:
            yield _Grant(entry)
        finally:
            self._release(entry)


_registry_lock = threading.Lock()
_registry: dict[tuple[str, str, str], RateLimiter] = {}


def limiter_for(name: str, base_url: str, model: str, limits: Limits) -> RateLimiter | None:
    """The process-wide limiter of one endpoint (None when it has no limits).

    Keyed by name, base URL and model, so every Endpoint object for the same configured model
    shares one limiter; new limits for the same key replace the old limiter.
    """
    if limits.unlimited:
        return None
    key = (name, base_url, model)
    with _registry_lock:
        current = _registry.get(key)
        if current is None or current.limits != limits:
            current = _registry[key] = RateLimiter(limits)
        return current


def estimate_tokens(messages: list[dict[str, object]], max_tokens: int | None) -> int:
    """A rough upper estimate of a request's tokens: 4 characters per prompt token."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    return chars // 4 + 1 + (max_tokens or 0)


def retry_after_seconds(headers: Any) -> float | None:
    """A Retry-After header in seconds (None when absent, an HTTP date, or nonsense)."""
    value = headers.get("retry-after") if headers is not None else None
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: rare for model APIs; fall back to our own backoff
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def retry_delay(attempt: int, backoff_s: float, error: BaseException | None) -> float:
    """Seconds before retry number `attempt` (from 1): exponential, or Retry-After if longer."""
    delay = backoff_s * (2 ** (attempt - 1))
    if isinstance(error, RateLimitedError) and error.retry_after_s is not None:
        delay = max(delay, min(error.retry_after_s, RETRY_AFTER_CAP_S))
    return delay
