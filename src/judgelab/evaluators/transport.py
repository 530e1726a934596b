"""How judge requests reach a model: a litellm custom provider named ``judgelab``.

ART's ``ruler`` (and our rubric judge) call ``litellm.acompletion(model="judgelab/<name>", ...)``.
litellm hands the request to :class:`JudgelabProvider`, which

* finds the :class:`~judgelab.models.endpoint.Endpoint` (the per-call context registered with
  :func:`judge_call`, or else the endpoint registered under ``<name>`` with
  :func:`register_endpoint`);
* adapts the request to what the endpoint can take:

  - system messages are merged into the first user message when ``endpoint.system_role`` is
    False (Gemma base model: llama.cpp's ``gemma`` chat format drops them);
  - ``response_format`` follows ``endpoint.structured_output``: ``"json_schema"`` passes the
    OpenAI-style format through; ``"json_object"`` sends ``{"type": "json_object", "schema":
    <schema with $defs inlined>}`` (llama-cpp-python's server answers HTTP 500 to
    ``json_schema``); ``"none"`` sends no format and appends the schema to the last user
    message, then cuts the first JSON object out of the reply;
  - every string field of the schema gets a ``maxLength`` (ids: :data:`ID_MAX_CHARS`, other
    strings: the judge's ``explanation_max_chars``) and, when the caller knows it, every array
    gets ``minItems``/``maxItems``: llama-cpp-python's grammar otherwise lets a string run on to
    ``max_tokens``. When the caller knows the ids a reply may name (RULER: ``"1"`` … ``"k"``),
    the id fields get an ``enum`` of them, and for ``json_object`` and prompt-only endpoints
    the array becomes a tuple naming them in order: SmolLM2 otherwise invents ids (``'5'``,
    ``'501dafb0'``) or names one twice, and each such reply costs a retry. Scores are
    deliberately *not* bounded, so out-of-range scores stay visible;

* answers from the ``"judge"`` :class:`~judgelab.cache.JsonCache` when it can. The key is exactly
  what changes the reply: endpoint fingerprint and model, the messages and response_format *as
  sent*, temperature, max_tokens, top_p and seed, and the endpoint's grammar sampler where
  judgelab knows it (never timeouts or retry counts). A hit makes no HTTP request. The raw
  reply is cached, good or bad: a retry must change the seed to get a new one;
* sends the request with ``openai.AsyncOpenAI(max_retries=0)``: retrying is the judge's job;
  each HTTP request first waits for the endpoint's limiter (:mod:`judgelab.models.ratelimit`:
  concurrency, requests and tokens per minute), and a 429's ``Retry-After`` pauses it;
* maps failures to typed errors: 429 → :class:`RateLimitedError` (``Retry-After`` kept),
  408/409/425/5xx, timeouts and connection errors → :class:`~judgelab.errors.TransientError`,
  other 4xx → :class:`JudgeRequestError` (not retryable);
* records the raw reply text, latency, token usage and any error on the :class:`CallRecord` of
  the call, because litellm wraps exceptions raised here into its own types and ART's parser
  drops the text of a reply it cannot parse.

The API key travels only in the ``Authorization: Bearer`` header; it is never logged, cached,
recorded or put into an error message.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import litellm
import openai

from judgelab.cache import JsonCache
from judgelab.errors import (
    JudgelabError,
    JudgeReplyError,
    ModelError,
    RateLimitedError,
    TransientError,
)
from judgelab.models.client import merge_system
from judgelab.models.endpoint import Endpoint
from judgelab.models.ratelimit import (
    RETRY_AFTER_CAP_S,
    estimate_tokens,
    retry_after_seconds,
)

log = logging.getLogger(__name__)

PROVIDER = "judgelab"
ID_MAX_CHARS = 8
DEFAULT_STRING_MAX_CHARS = 300
_CACHE_VERSION = 1
_NO_KEY = "sk-no-key-required"  # the openai client refuses an empty key; local servers ignore it
_T = TypeVar("_T")


class JudgeRequestError(ModelError):
    """The endpoint rejected the request (4xx other than 429/408/409/425). Not retryable."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


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
    cached: bool = False
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
_endpoints: dict[str, Endpoint] = {}
_calls: dict[str, _CallContext] = {}
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


# --- request adaptation -------------------------------------------------------------------


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace local ``#/$defs/X`` references by their definitions and drop ``$defs``."""
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.split("/")[-1] in defs:
                name = ref.split("/")[-1]
                if name in seen:
                    raise JudgeRequestError(f"recursive schema reference {ref!r} cannot be inlined")
                merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
                return resolve(merged, (*seen, name))
            return {
                k: resolve(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")
            }
        if isinstance(node, list):
            return [resolve(v, seen) for v in node]
        return node

    return resolve(schema, ())


# Characters one reply item can take besides its explanation under the bounded schema: keys,
# quotes, separators and optional spaces, an id of ID_MAX_CHARS, and a number of up to 16
# integer, 16 fraction and 16 exponent digits (llama.cpp's JSON-schema grammar).
ITEM_OVERHEAD_CHARS = 128


def reply_token_budget(items: int, string_max_chars: int) -> int:
    """Output tokens for the longest reply a schema bounded by `bound_schema` allows (`items`
    objects, each with one explanation of at most `string_max_chars`), at one token per
    character: a small model can write every character as its own token (Gemma-3 writes
    digits that way, and its zero-filled explanations ran past 512 tokens at k = 4, so the
    reply was cut off and retried). A truncated reply is judgelab's budget failing, not the
    judge."""
    return max(1, items) * (string_max_chars + ITEM_OVERHEAD_CHARS) + 32


def _is_id(prop: str | None) -> bool:
    """Whether a property holds an id (``id`` or ``*_id``): bounded to ID_MAX_CHARS."""
    return prop is not None and (prop == "id" or prop.endswith("_id"))


def bound_schema(
    schema: dict[str, Any],
    string_max_chars: int,
    array_items: int | None = None,
    ids: tuple[str, ...] | None = None,
    ordered: bool = False,
) -> dict[str, Any]:
    """A copy of ``schema`` whose strings have a maxLength (and arrays a length, if given);
    with ``ids``, every id string (a property ``id`` or ``*_id``) is one of them. With
    ``ordered`` too, an array of ``len(ids)`` objects that carry an id becomes a tuple
    (``prefixItems``) whose i-th object names the i-th id: no id twice, none left out."""
    out = copy.deepcopy(schema)

    def as_tuple(node: dict[str, Any]) -> None:
        item = node.get("items")
        if not ids or array_items != len(ids) or not isinstance(item, dict):
            return
        key = next((p for p in item.get("properties") or {} if _is_id(p)), None)
        if key is None:
            return
        node["prefixItems"] = []
        for i in ids:
            one = copy.deepcopy(item)
            one["properties"][key]["enum"] = [i]
            node["prefixItems"].append(one)
        del node["items"]  # llama.cpp's converter reads `items` before `prefixItems`

    def visit(node: Any, prop: str | None) -> None:
        if not isinstance(node, dict):
            return
        is_id = _is_id(prop)
        if node.get("type") == "string" and "maxLength" not in node:
            node["maxLength"] = ID_MAX_CHARS if is_id else string_max_chars
        if node.get("type") == "string" and is_id and ids and "enum" not in node:
            node["enum"] = list(ids)
        if node.get("type") == "array" and array_items is not None:
            node.setdefault("minItems", array_items)
            node.setdefault("maxItems", array_items)
        for name, child in (node.get("properties") or {}).items():
            visit(child, name)
        for key in ("$defs", "definitions"):
            for child in (node.get(key) or {}).values():
                visit(child, None)
        visit(node.get("items"), None)
        for key in ("anyOf", "oneOf", "allOf"):
            for child in node.get(key) or []:
                visit(child, prop)
        if ordered and node.get("type") == "array":
            as_tuple(node)

    visit(out, None)
    return out


def _schema_of(response_format: Any) -> dict[str, Any] | None:
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        inner = response_format.get("json_schema") or {}
        schema = inner.get("schema")
        return schema if isinstance(schema, dict) else None
    schema = response_format.get("schema")
    return schema if isinstance(schema, dict) else None


def adapt_request(
    messages: list[dict[str, Any]],
    response_format: Any,
    endpoint: Endpoint,
    string_max_chars: int,
    array_items: int | None = None,
    ids: tuple[str, ...] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The messages and response_format to send to ``endpoint`` (see the module docstring)."""
    sent = [{k: v for k, v in m.items()} for m in messages]
    if not endpoint.system_role:
        sent = merge_system(sent)
    schema = _schema_of(response_format)
    if schema is None:
        if isinstance(response_format, dict) and endpoint.structured_output != "none":
            return sent, dict(response_format)  # e.g. a plain {"type": "json_object"}
        return sent, None
    mode = endpoint.structured_output
    if mode == "json_schema":
        rf = copy.deepcopy(response_format)
        bounded = bound_schema(schema, string_max_chars, array_items, ids)
        if rf.get("type") == "json_schema":
            rf["json_schema"]["schema"] = bounded
        else:
            rf["schema"] = bounded
        return sent, rf
    # The local grammar takes a tuple of ids in order; hosted json_schema modes may not.
    flat = bound_schema(inline_refs(schema), string_max_chars, array_items, ids, ordered=True)
    if mode == "json_object":
        return sent, {"type": "json_object", "schema": flat}
    instruction = (
        "\n\nReply with one JSON object and nothing else. It must match this JSON schema:\n"
        + json.dumps(flat, ensure_ascii=False)
    )
    for m in reversed(sent):
        if m.get("role") == "user":
            m["content"] = f"{m.get('content') or ''}{instruction}"
            break
    else:
        sent.append({"role": "user", "content": instruction.lstrip()})
    return sent, None


def extract_json_object(text: str) -> str:
    """The first complete JSON object in ``text`` (for prompt-only endpoints), else ``text``."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            _, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return text[start:end]
    return text


def normalize_json(text: str) -> str:
    """Re-serialise JSON that is only invalid for raw control characters inside strings.

    llama-cpp-python's schema grammar lets raw newlines and tabs into JSON strings, which
    strict parsers (pydantic, ART) reject although the judge's answer is intact. Such a reply
    is re-encoded; anything else is returned unchanged (and fails parsing as it should). The
    raw text is kept as it came in the call record.
    """
    try:
        json.loads(text)
        return text
    except json.JSONDecodeError:
        pass
    try:
        return json.dumps(json.loads(text, strict=False), ensure_ascii=False)
    except json.JSONDecodeError:
        return text


# --- the provider -------------------------------------------------------------------------


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
        sent, response_format = adapt_request(
            list(messages),
            optional_params.get("response_format"),
            endpoint,
            ctx.string_max_chars,
            ctx.array_items,
            ctx.ids,
        )
        sampling = {
            k: optional_params[k]
            for k in ("temperature", "max_tokens", "top_p", "seed")
            if optional_params.get(k) is not None
        }
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
        start = time.perf_counter()
        hit = ctx.cache.get(key) if ctx.cache is not None else None
        if hit is not None:
            record.cached = True
            record.cache_key = ctx.cache.key_hash(key) if ctx.cache is not None else None
            raw, finish = hit.get("raw") or "", hit.get("finish_reason")
            usage = (hit.get("prompt_tokens"), hit.get("completion_tokens"))
        else:
            raw, finish, usage = await self._post(endpoint, sent, response_format, sampling, record)
            if ctx.cache is not None:
                ctx.cache.put(
                    key,
                    {
                        "raw": raw,
                        "finish_reason": finish,
                        "prompt_tokens": usage[0],
                        "completion_tokens": usage[1],
                    },
                )
                record.cache_key = ctx.cache.key_hash(key)
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
        content = extract_json_object(raw) if endpoint.structured_output == "none" else raw
        content = normalize_json(content)
        prompt_tokens, completion_tokens = usage[0] or 0, usage[1] or 0
        # Fill in litellm's own response object, as its built-in providers do.
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
        return model_response

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
        client = openai.AsyncOpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or _NO_KEY,
            timeout=endpoint.timeout_s,
            max_retries=0,
        )
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
        finally:
            await client.close()
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


# --- running judges synchronously ---------------------------------------------------------


_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None


def _judge_loop() -> asyncio.AbstractEventLoop:
    """One event loop per process, in a daemon thread, shared by every judge call.

    litellm keeps per-loop state (its logging worker); a fresh ``asyncio.run`` per call makes it
    drop queued callbacks, and concurrent loops from several Prefect threads make it thrash.
    """
    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop.is_closed() or _loop_pid != os.getpid():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="judgelab-judges", daemon=True)
            thread.start()
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on the judge loop and wait for it; safe from any thread or inside a loop."""
    loop = _judge_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("a judge was called synchronously from the judge loop itself")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def raw_tail(text: str | None, max_chars: int) -> str | None:
    """The last ``max_chars`` characters of a reply (where a truncated JSON reply went wrong)."""
    if not text:
        return None
    return text if len(text) <= max_chars else "…" + text[-(max_chars - 1) :]
