"""Plain chat completions against an Endpoint, with bounded retries on transient failures.

Each request waits for the endpoint's limiter (`judgelab.models.ratelimit`); a 429 becomes
`RateLimitedError`, pauses that limiter for the server's Retry-After, and is retried no
sooner than Retry-After.

Used by the policy (rollouts, AutoRL task writing). Judges go through the litellm transport
in `judgelab.evaluators.transport`, because ART's RULER speaks litellm.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, TypeVar

import openai

from judgelab.errors import ModelError, RateLimitedError, TransientError
from judgelab.models.endpoint import Endpoint
from judgelab.models.ratelimit import (
    RETRY_AFTER_CAP_S,
    estimate_tokens,
    retry_after_seconds,
    retry_delay,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str | None
    completion_tokens: int
    latency_s: float


def merge_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fold every system message into the first user message (templates with no system role)."""
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    if not system:
        return rest
    prefix = "\n\n".join(system)
    for m in rest:
        if m.get("role") == "user":
            m["content"] = f"{prefix}\n\n{m.get('content') or ''}"
            return rest
    return [{"role": "user", "content": prefix}, *rest]


# The openai client refuses an empty key; local servers ignore it.
NO_KEY = "sk-no-key-required"
_clients_lock = threading.Lock()
_clients: dict[tuple, openai.OpenAI | openai.AsyncOpenAI] = {}
_C = TypeVar("_C", openai.OpenAI, openai.AsyncOpenAI)


def _shared(ep: Endpoint, cls: type[_C], scope: int) -> _C:
    key = (cls.__name__, scope, os.getpid(), ep.base_url, ep.api_key, ep.timeout_s)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = cls(
                base_url=ep.base_url, api_key=ep.api_key or NO_KEY, timeout=ep.timeout_s,
                max_retries=0,
            )  # fmt: skip
    return client  # type: ignore[return-value]


def sync_client(ep: Endpoint) -> openai.OpenAI:
    """The process's client for this endpoint, shared by every thread (httpx is thread-safe).

    Building a client builds an SSL context, about 10 ms of CPU: more than a loopback call
    costs, and per call it made concurrency CPU-bound (docs/BENCHMARKS.md, scaling). Retrying
    is the caller's job (`max_retries=0`).
    """
    return _shared(ep, openai.OpenAI, 0)


def async_client(ep: Endpoint) -> openai.AsyncOpenAI:
    """The running event loop's client for this endpoint (an async client belongs to the loop
    it first ran on); see `sync_client`."""
    return _shared(ep, openai.AsyncOpenAI, id(asyncio.get_running_loop()))


def chat_once(
    ep: Endpoint,
    messages: list[dict],
    *,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int,
) -> Completion:
    msgs = messages if ep.system_role else merge_system(messages)
    limiter = ep.limiter
    start = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            if limiter is not None:
                grant = stack.enter_context(limiter.slot(estimate_tokens(msgs, max_tokens)))
            resp = sync_client(ep).chat.completions.create(
                model=ep.model,
                messages=msgs,
                temperature=temperature,
                top_p=top_p,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                seed=seed,
            )
            if limiter is not None and resp.usage is not None:
                grant.used(resp.usage.total_tokens)
    except openai.RateLimitError as err:
        after = retry_after_seconds(err.response.headers)
        if after is not None and limiter is not None:
            limiter.pause(min(after, RETRY_AFTER_CAP_S))
        raise RateLimitedError(f"{ep.name}: HTTP 429 rate limited: {err.message}", after) from err
    except (
        openai.APITimeoutError,
        openai.APIConnectionError,
        openai.InternalServerError,
    ) as err:
        raise TransientError(f"{ep.name}: {err.__class__.__name__}: {err}") from err
    except openai.APIStatusError as err:
        raise ModelError(f"{ep.name}: HTTP {err.status_code}: {err.message}") from err
    latency = time.monotonic() - start
    if not resp.choices:
        raise TransientError(f"{ep.name}: reply had no choices")
    choice = resp.choices[0]
    text = choice.message.content
    if text is None:
        raise TransientError(f"{ep.name}: reply had no content")
    tokens = resp.usage.completion_tokens if resp.usage else 0
    return Completion(
        text=text, finish_reason=choice.finish_reason, completion_tokens=tokens, latency_s=latency
    )


def chat(
    ep: Endpoint,
    messages: list[dict],
    *,
    temperature: float,
    top_p: float = 1.0,
    max_tokens: int,
    seed: int,
    retries: int = 3,
    backoff_s: float = 1.0,
) -> Completion:
    """`chat_once` with up to `retries` retries of transient failures (429: after at least
    the server's Retry-After)."""
    for attempt in range(retries + 1):
        try:
            return chat_once(
                ep, messages, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed
            )
        except TransientError as err:
            if attempt == retries:
                raise
            wait = retry_delay(attempt + 1, backoff_s, err)
            log.warning(
                "%s (attempt %d/%d); retrying in %.1fs", err, attempt + 1, retries + 1, wait
            )
            time.sleep(wait)
    raise AssertionError("unreachable")
