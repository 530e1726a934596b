"""The ``judgelab`` litellm provider: how a judge request reaches its endpoint.

ART's ``ruler`` and the rubric judge call ``litellm.acompletion(model="judgelab/<name>", ...)``;
litellm hands the request to `JudgelabProvider`, which

* finds the `~judgelab.models.endpoint.Endpoint`: the per-call context opened by `judge_call`,
  or else the endpoint registered under ``<name>`` by `register_endpoint`;
* adapts the request to the endpoint (`judgelab.evaluators.transport.schema`) in its
  structured-output mode: the setting, or for ``auto`` the mode
  `judgelab.evaluators.transport.detect` found once per endpoint and model;
* answers from the ``"judge"`` `~judgelab.cache.JsonCache` when it can, and sends a request
  only once while it is in flight (identical concurrent calls share its reply). The key is exactly
  what changes the reply: endpoint fingerprint and model, the messages and response_format
  *as sent*, temperature, max_tokens, top_p and seed, and the endpoint's grammar sampler where
  judgelab knows it (never timeouts or retry counts). A hit makes no HTTP request. The raw
  reply is cached, good or bad: a retry must change the seed to get a new one;
* sends the request with the endpoint's shared ``openai.AsyncOpenAI(max_retries=0)``
  (`judgelab.models.client.async_client`): retrying is the judge's job;
  each HTTP request first waits for the endpoint's limiter (`judgelab.models.ratelimit`),
  and a 429's ``Retry-After`` pauses it;
* maps failures to typed errors: 429 → `RateLimitedError` (``Retry-After`` kept),
  408/409/425/5xx, timeouts and connection errors → `TransientError`, other 4xx →
  `JudgeRequestError` (not retryable);
* records the raw reply text, latency, token usage and any error on the call's `CallRecord`,
  because litellm wraps exceptions raised here into its own types and ART's parser drops
  the text of a reply it cannot parse. The reply's token usage and the latency of the request
  that made it are cached with it (in the value, never the key), so a hit still says what the
  reply cost to make (``reply_latency_s``).

The API key travels only in the ``Authorization: Bearer`` header; it is never logged, cached,
recorded or put into an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import litellm
import openai

from judgelab.cache import JsonCache
from judgelab.errors import (
    JudgelabError,
    JudgeReplyError,
    JudgeRequestError,
    ModelError,
    RateLimitedError,
    TransientError,
)
from judgelab.evaluators.transport.detect import resolve as resolve_mode
from judgelab.evaluators.transport.schema import (
    DEFAULT_STRING_MAX_CHARS,
    adapt_request,
    extract_json_object,
    normalize_json,
)
from judgelab.models.client import async_client
from judgelab.models.endpoint import Endpoint
from judgelab.models.ratelimit import (
    RETRY_AFTER_CAP_S,
    estimate_tokens,
    retry_after_seconds,
)

log = logging.getLogger(__name__)

PROVIDER = "judgelab"
_CACHE_VERSION = 1


@dataclass
class CallRecord:
    """What happened on one judge call (one attempt). Filled in by the provider."""

    call_id: str
    endpoint: str
    raw: str | None = None  # the reply text exactly as the model wrote it
    finish_reason: str | None = None
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # Seconds the model took to write the reply: this call's HTTP request on a miss, the one
    # the judge cache recorded on a hit (None: cached before judgelab recorded it).
    reply_latency_s: float | None = None
    cached: bool = False  # answered without a request of its own (module docstring)
    seeded: bool = False  # of those, first found in a seed cache (`cache.seeds`)
    http_requests: int = 0
    cache_key: str | None = None
    error: JudgelabError | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (the error as its type and message)."""
        out = asdict(self)
        out["error"] = None if self.error is None else f"{type(self.error).__name__}: {self.error}"
        return out


@dataclass(frozen=True)
class _CallContext:
    endpoint: Endpoint
    cache: JsonCache | None
    string_max_chars: int
    array_items: int | None
    ids: tuple[str, ...] | None
    record: CallRecord


_lock = threading.Lock()
_prepare_lock = threading.Lock()
_endpoints: dict[str, Endpoint] = {}
_calls: dict[str, _CallContext] = {}
# (event loop, cache, key hash) -> the reply of the identical request already in flight
_in_flight: dict[tuple[int, str, str], asyncio.Future[dict[str, Any]]] = {}
_provider: JudgelabProvider | None = None


def _install() -> None:
    """Add our provider to litellm's custom provider map (once, keeping any others)."""
    global _provider
    with _lock:
        if _provider is not None and any(
            p.get("custom_handler") is _provider for p in litellm.custom_provider_map
        ):
            return
        _provider = _provider or JudgelabProvider()
        others = [p for p in litellm.custom_provider_map if p.get("provider") != PROVIDER]
        litellm.custom_provider_map = [*others, {"provider": PROVIDER, "custom_handler": _provider}]
        litellm.suppress_debug_info = True  # else litellm prints help banners on every error


def register_endpoint(endpoint: Endpoint) -> str:
    """Make ``endpoint`` callable through litellm; returns the model name to pass to it."""
    _install()
    with _lock:
        old = _endpoints.get(endpoint.name)
        if old is not None and old != endpoint:
            log.debug("endpoint %r re-registered (%r)", endpoint.name, endpoint)
        _endpoints[endpoint.name] = endpoint
    return f"{PROVIDER}/{endpoint.name}"


_prepared: set[tuple] = set()


def prepare(endpoint: Endpoint) -> None:
    """Once per endpoint and process, before any judge call: build the endpoint's client on
    the judge loop, load the OpenAI SDK's chat modules and litellm's tokenizer. The first
    judge call would do all this itself (≈ 0.1 s of CPU), and in a concurrent lane every call
    of the first wave would wait behind it (docs/BENCHMARKS.md, scaling)."""
    from judgelab.evaluators.transport.loop import run_sync

    key = (os.getpid(), endpoint.base_url, endpoint.api_key, endpoint.timeout_s)
    with _prepare_lock:
        if key in _prepared:
            return
        _prepared.add(key)

    async def build() -> None:
        async_client(endpoint).chat.completions  # noqa: B018 (loads the SDK's chat modules)

    run_sync(build())
    litellm.encoding  # noqa: B018 (litellm loads its tokenizer on first use)


@contextlib.contextmanager
def judge_call(
    endpoint: Endpoint,
    cache: JsonCache | None,
    *,
    string_max_chars: int = DEFAULT_STRING_MAX_CHARS,
    array_items: int | None = None,
    ids: tuple[str, ...] | None = None,
) -> Iterator[CallRecord]:
    """Open a call context; pass ``call_metadata(record)`` as litellm's ``metadata``.

    The provider fills the yielded record in; the context is removed on exit.
    """
    register_endpoint(endpoint)
    record = CallRecord(call_id=uuid.uuid4().hex, endpoint=endpoint.name)
    ctx = _CallContext(
        endpoint=endpoint,
        cache=cache,
        string_max_chars=string_max_chars,
        array_items=array_items,
        ids=ids,
        record=record,
    )
    with _lock:
        _calls[record.call_id] = ctx
    try:
        yield record
    finally:
        with _lock:
            _calls.pop(record.call_id, None)


def call_metadata(record: CallRecord) -> dict[str, str]:
    return {"judgelab_call_id": record.call_id}


def _context_for(model: str, litellm_params: dict[str, Any] | None) -> _CallContext:
    metadata = (litellm_params or {}).get("metadata") or {}
    call_id = metadata.get("judgelab_call_id") if isinstance(metadata, dict) else None
    name = model.split("/", 1)[1] if model.startswith(f"{PROVIDER}/") else model
    with _lock:
        if call_id is not None and call_id in _calls:
            return _calls[call_id]
        endpoint = _endpoints.get(name)
        known = sorted(_endpoints)
    if endpoint is None:
        raise JudgeRequestError(f"no judge endpoint registered as {name!r}; registered: {known}")
    record = CallRecord(call_id=call_id or uuid.uuid4().hex, endpoint=name)
    # A call outside `judge_call` (litellm used directly): no cache, no schema bounds.
    return _CallContext(
        endpoint=endpoint,
        cache=None,
        string_max_chars=DEFAULT_STRING_MAX_CHARS,
        array_items=None,
        ids=None,
        record=record,
    )


def _map_openai_error(err: Exception, endpoint: Endpoint) -> JudgelabError:
    where = f"judge endpoint {endpoint.name!r}"
    if isinstance(err, openai.APITimeoutError):
        return TransientError(f"{where}: timed out after {endpoint.timeout_s:g} s")
    if isinstance(err, openai.APIConnectionError):
        return TransientError(f"{where}: connection failed ({err.__class__.__name__})")
    if isinstance(err, openai.APIStatusError):
        status = err.status_code
        detail = str(err.message)[:300]
        if status == 429:
            after = retry_after_seconds(err.response.headers)
            if after is not None and endpoint.limiter is not None:
                endpoint.limiter.pause(min(after, RETRY_AFTER_CAP_S))
            return RateLimitedError(f"{where}: HTTP 429 rate limited: {detail}", after)
        if status in (408, 409, 425) or status >= 500:
            return TransientError(f"{where}: HTTP {status}: {detail}")
        return JudgeRequestError(f"{where}: HTTP {status} request rejected: {detail}", status)
    if isinstance(err, openai.APIResponseValidationError | json.JSONDecodeError):
        return TransientError(f"{where}: malformed HTTP response ({err.__class__.__name__})")
    return ModelError(f"{where}: {err.__class__.__name__}: {err}")


def _cache_key(
    endpoint: Endpoint,
    sent: list[dict[str, Any]],
    response_format: dict[str, Any] | None,
    sampling: dict[str, Any],
) -> dict[str, Any]:
    """The judge cache's key: exactly what changes the reply (module docstring)."""
    key = {
        "v": _CACHE_VERSION,
        "fingerprint": endpoint.fingerprint,
        "model": endpoint.model,
        "messages": sent,
        "response_format": response_format,
        **{k: sampling.get(k) for k in ("temperature", "max_tokens", "top_p", "seed")},
    }
    if endpoint.grammar_sampler is not None:  # absent from remote keys: those stay valid
        key["grammar_sampler"] = endpoint.grammar_sampler
    return key


def _fill_response(
    model_response: litellm.ModelResponse,
    record: CallRecord,
    endpoint: Endpoint,
    content: str,
    usage: tuple[int | None, int | None],
    finish: str | None,
) -> None:
    """Fill in litellm's own response object, as its built-in providers do."""
    prompt_tokens, completion_tokens = usage[0] or 0, usage[1] or 0
    model_response.id = f"judgelab-{record.call_id}"
    model_response.model = endpoint.model
    choice = model_response.choices[0]
    choice.message.content = content  # type: ignore[union-attr]
    choice.finish_reason = finish or "stop"
    model_response.usage = litellm.Usage(  # type: ignore[attr-defined]
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )


class JudgelabProvider(litellm.CustomLLM):
    """litellm custom provider that sends judge requests to judgelab endpoints."""

    async def acompletion(  # type: ignore[override]
        self,
        model: str,
        messages: list,
        api_base: str,
        custom_prompt_dict: dict,
        model_response: litellm.ModelResponse,
        print_verbose: Callable,
        encoding: Any,
        api_key: Any,
        logging_obj: Any,
        optional_params: dict,
        acompletion: Any = None,
        litellm_params: dict | None = None,
        logger_fn: Any = None,
        headers: dict | None = None,
        timeout: Any = None,
        client: Any = None,
    ) -> litellm.ModelResponse:
        ctx = _context_for(model, litellm_params)
        try:
            return await self._complete(ctx, messages, optional_params or {}, model_response)
        except JudgelabError as err:
            ctx.record.error = err
            raise
        except Exception as err:  # anything else is our bug or an SDK surprise: keep it typed
            ctx.record.error = ModelError(
                f"judge transport failed: {err.__class__.__name__}: {err}"
            )
            raise

    def completion(self, *args: Any, **kwargs: Any) -> litellm.ModelResponse:  # type: ignore[override]
        raise JudgeRequestError("the judgelab provider is async only: use litellm.acompletion")

    async def _complete(
        self,
        ctx: _CallContext,
        messages: list,
        optional_params: dict,
        model_response: litellm.ModelResponse,
    ) -> litellm.ModelResponse:
        endpoint, record = ctx.endpoint, ctx.record
        cache_root = ctx.cache.root.parent if ctx.cache is not None else None
        mode = (await resolve_mode(endpoint, cache_root)).mode
        sent, response_format = adapt_request(
            list(messages),
            optional_params.get("response_format"),
            endpoint,
            ctx.string_max_chars,
            ctx.array_items,
            ctx.ids,
            mode=mode,
        )
        sampling = {
            k: optional_params[k]
            for k in ("temperature", "max_tokens", "top_p", "seed")
            if optional_params.get(k) is not None
        }
        key = _cache_key(endpoint, sent, response_format, sampling)
        start = time.perf_counter()
        entry, record.cached, record.seeded = await self._reply(
            ctx, key, sent, response_format, sampling
        )
        record.cache_key = ctx.cache.key_hash(key) if ctx.cache is not None else None
        raw, finish = entry.get("raw") or "", entry.get("finish_reason")
        usage = (entry.get("prompt_tokens"), entry.get("completion_tokens"))
        record.reply_latency_s = entry.get("latency_s")
        record.latency_s = time.perf_counter() - start
        record.raw, record.finish_reason = raw, finish
        record.prompt_tokens, record.completion_tokens = usage
        log.debug(
            "judge %s: %s in %.2f s, %s+%s tokens, finish=%s",
            endpoint.name,
            "cache hit" if record.cached else "HTTP reply",
            record.latency_s,
            usage[0],
            usage[1],
            finish,
        )
        content = extract_json_object(raw) if mode == "text" else raw
        _fill_response(model_response, record, endpoint, normalize_json(content), usage, finish)
        return model_response

    async def _reply(
        self,
        ctx: _CallContext,
        key: dict[str, Any],
        sent: list[dict[str, Any]],
        response_format: dict[str, Any] | None,
        sampling: dict[str, Any],
    ) -> tuple[dict[str, Any], bool, bool]:
        """The reply's cache entry; whether this call made no request of its own: it came
        from the cache, or from an identical request already in flight on this loop (awaited,
        not sent twice: concurrent groups often hold identical candidates); and whether it
        came from a seed cache. A reply is cached before any caller sees it."""
        cache = ctx.cache
        if cache is None:
            return await self._fetch(ctx, sent, response_format, sampling), False, False
        hit, seeded = cache.lookup(key)
        if hit is not None:
            return hit, True, seeded
        loop = asyncio.get_running_loop()
        flight = (id(loop), str(cache.root), cache.key_hash(key))
        pending = _in_flight.get(flight)
        if pending is not None:
            return await asyncio.shield(pending), True, False
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        _in_flight[flight] = future
        try:
            entry = await self._fetch(ctx, sent, response_format, sampling)
            # off the loop: the write's fsync would stall every other call in flight
            await asyncio.to_thread(cache.put, key, entry)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as err:
            future.set_exception(err)
            future.exception()  # marked retrieved: nobody may be waiting
            raise
        finally:
            _in_flight.pop(flight, None)
        future.set_result(entry)
        return entry, False, False

    async def _fetch(
        self,
        ctx: _CallContext,
        sent: list[dict[str, Any]],
        response_format: dict[str, Any] | None,
        sampling: dict[str, Any],
    ) -> dict[str, Any]:
        """One HTTP request; the reply as a cache entry (its latency in the value, never the
        key)."""
        start = time.perf_counter()
        raw, finish, usage = await self._post(
            ctx.endpoint, sent, response_format, sampling, ctx.record
        )
        return {
            "raw": raw,
            "finish_reason": finish,
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "latency_s": time.perf_counter() - start,
        }

    async def _post(
        self,
        endpoint: Endpoint,
        messages: list[dict[str, Any]],
        response_format: dict[str, Any] | None,
        sampling: dict[str, Any],
        record: CallRecord,
    ) -> tuple[str, str | None, tuple[int | None, int | None]]:
        body: dict[str, Any] = {"model": endpoint.model, "messages": messages, **sampling}
        if response_format is not None:
            body["response_format"] = response_format
        client = async_client(endpoint)
        limiter = endpoint.limiter
        try:
            async with contextlib.AsyncExitStack() as stack:
                if limiter is not None:
                    tokens = estimate_tokens(messages, sampling.get("max_tokens"))
                    grant = await stack.enter_async_context(limiter.aslot(tokens))
                record.http_requests += 1
                resp = await client.chat.completions.create(**body)
                usage = getattr(resp, "usage", None)
                if limiter is not None and usage is not None:
                    grant.used(getattr(usage, "total_tokens", None))
        except (openai.OpenAIError, json.JSONDecodeError) as err:
            raise _map_openai_error(err, endpoint) from None
        choices = getattr(resp, "choices", None)
        if not choices:
            raise JudgeReplyError(f"judge endpoint {endpoint.name!r}: reply has no choices", raw="")
        choice = choices[0]
        raw = choice.message.content if choice.message is not None else None
        usage = getattr(resp, "usage", None)
        tokens = (
            getattr(usage, "prompt_tokens", None) if usage else None,
            getattr(usage, "completion_tokens", None) if usage else None,
        )
        return raw or "", choice.finish_reason, tokens
