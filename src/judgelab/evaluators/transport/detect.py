"""Which structured-output mode a judge endpoint takes, found once per endpoint and model.

An endpoint model's ``structured_output`` setting (docs/ENDPOINTS.md) is one of

* ``json_schema``: OpenAI style, ``{"type": "json_schema", "json_schema": {...}}``;
* ``json_object``: llama-cpp-python style, ``{"type": "json_object", "schema": {...}}``;
* ``text``: no ``response_format``; the schema goes into the prompt and the first JSON object
  of the reply is validated like any other;
* ``auto`` (the default): `resolve` sends one cheap trial request per mode, in that order
  (a few output tokens, a one-key schema with no strings), and takes the first mode the
  endpoint accepts (any 2xx). A rejection (an HTTP status other than 401, 403, 408 and 429)
  moves on to the next mode; llama-cpp-python's server, for one, answers HTTP 500 to
  ``json_schema``. An explicit setting wins and sends no trial.

The outcome is remembered for the process (``(base_url, model)``: every judge on one model
shares it; each stage process tries once) and written beside the judge cache (namespace
``structured_output``, keyed by the endpoint's fingerprint and model). When no trial is
conclusive (the endpoint is unreachable, refuses the key, or rejects even a plain request),
the mode found earlier is used (source ``remembered``), so a rerun from the caches while the
endpoint is down sends the same requests and finds the same cache entries; with none on disk
either, judge calls send ``json_schema`` and fail with the endpoint's own error, which the
scores stage reports (`judgelab.scoring.failures`).

The mode changes what is sent, so it is in every judge cache key through the request as
sent (never as "auto" or as how it was found): an ``auto`` run that finds ``json_object``
and a run that sets ``json_object`` share their cache entries. Run ids hold the setting,
never the trial's outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from dataclasses import asdict, dataclass
from typing import Any, Literal

import openai

from judgelab.cache import JsonCache
from judgelab.models.client import async_client
from judgelab.models.endpoint import Endpoint

log = logging.getLogger(__name__)

Mode = Literal["json_schema", "json_object", "text"]
MODES: tuple[Mode, ...] = ("json_schema", "json_object", "text")
FALLBACK: Mode = "json_schema"
NAMESPACE = "structured_output"
_VERSION = 1

TRIAL_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}
TRIAL_MESSAGES = [{"role": "user", "content": 'Reply with the JSON object {"ok": true} only.'}]
TRIAL_MAX_TOKENS = 16
# Statuses that say nothing about the format: a wrong key, a timeout, a rate limit.
_INCONCLUSIVE = frozenset({401, 403, 408, 429})


@dataclass(frozen=True)
class Detection:
    """The mode judge calls send to an endpoint, and how it was found.

    ``source``: ``setting`` (explicit in params.yaml, or judgelab's own embedded server),
    ``trial`` (found now), ``remembered`` (no trial was conclusive now; the mode an earlier
    trial found, read beside the judge cache) or ``fallback`` (neither; ``detail`` says why).
    """

    mode: Mode
    source: Literal["setting", "trial", "remembered", "fallback"]
    detail: str = ""

    def describe(self) -> str:
        """One line for `judgelab doctor` and the report's provenance."""
        how = {
            "setting": "set in params.yaml",
            "trial": "detected by a trial request",
            "remembered": "trial inconclusive, mode found earlier",
            "fallback": "not detected, default sent",
        }[self.source]
        return f"{self.mode} ({how}{': ' + self.detail if self.detail else ''})"

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


_lock = threading.Lock()
_detected: dict[tuple[int, str, str], Detection] = {}
_by_name: dict[str, Detection] = {}
_async_locks: dict[tuple[int, int, str, str], asyncio.Lock] = {}


def explicit_mode(endpoint: Endpoint) -> Mode | None:
    """The endpoint's mode when it is set, None for ``auto``."""
    mode = endpoint.structured_output
    return None if mode == "auto" else mode


def _key(endpoint: Endpoint) -> tuple[int, str, str]:
    return (os.getpid(), endpoint.base_url, endpoint.model)


def _store(endpoint: Endpoint, cache_root: Any) -> JsonCache | None:
    return None if cache_root is None else JsonCache(cache_root, NAMESPACE)


def _store_key(endpoint: Endpoint) -> dict[str, Any]:
    return {"v": _VERSION, "fingerprint": endpoint.fingerprint, "model": endpoint.model}


def _remember(endpoint: Endpoint, detection: Detection) -> Detection:
    with _lock:
        _detected[_key(endpoint)] = detection
        _by_name[endpoint.name] = detection
    return detection


def detections() -> dict[str, dict[str, str]]:
    """Every endpoint name resolved in this process -> its `Detection` as a dict."""
    with _lock:
        return {name: d.to_dict() for name, d in sorted(_by_name.items())}


def forget() -> None:
    """Drop what this process found (tests; a new run in the same process)."""
    with _lock:
        _detected.clear()
        _by_name.clear()


def _status_detail(err: openai.APIStatusError) -> str:
    return f"HTTP {err.status_code}: {str(err.message)[:200]}"


def _trial_format(mode: Mode) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": "trial", "schema": TRIAL_SCHEMA, "strict": True},
        }
    if mode == "json_object":
        return {"type": "json_object", "schema": TRIAL_SCHEMA}
    return None


async def _try(endpoint: Endpoint, mode: Mode) -> tuple[bool | None, str]:
    """(True: accepted | False: rejected | None: says nothing about the format, detail)."""
    body: dict[str, Any] = {
        "model": endpoint.model,
        "messages": TRIAL_MESSAGES,
        "max_tokens": TRIAL_MAX_TOKENS,
        "temperature": 0.0,
    }
    response_format = _trial_format(mode)
    if response_format is not None:
        body["response_format"] = response_format
    limiter = endpoint.limiter
    try:
        async with contextlib.AsyncExitStack() as stack:
            if limiter is not None:
                await stack.enter_async_context(limiter.aslot(64))
            await async_client(endpoint).chat.completions.create(**body)
    except openai.APIStatusError as err:
        return (None if err.status_code in _INCONCLUSIVE else False), _status_detail(err)
    except openai.APITimeoutError:
        return None, f"timed out after {endpoint.timeout_s:g} s"
    except openai.APIConnectionError as err:
        return None, f"connection failed ({err.__class__.__name__})"
    except openai.OpenAIError as err:  # a 200 whose body is no chat completion
        return None, f"{err.__class__.__name__}: {str(err)[:200]}"
    return True, "accepted"


async def detect(endpoint: Endpoint) -> Detection:
    """Send the trial requests (module docstring) and say what they found; remembers nothing."""
    rejected: list[str] = []
    for mode in MODES:
        accepted, detail = await _try(endpoint, mode)
        if accepted:
            why = "; ".join(rejected) if rejected else f"{mode} accepted"
            return Detection(mode, "trial", why)
        if accepted is None:
            return Detection(FALLBACK, "fallback", f"trial with {mode}: {detail}")
        rejected.append(f"{mode} rejected ({detail})")
    return Detection(FALLBACK, "fallback", "every mode rejected: " + "; ".join(rejected))


async def resolve(endpoint: Endpoint, cache_root: Any = None) -> Detection:
    """The mode to send to ``endpoint``: the setting, else what this process or an earlier
    stage found, else a trial now (one at a time per endpoint and model)."""
    mode = explicit_mode(endpoint)
    if mode is not None:
        return Detection(mode, "setting")
    key = _key(endpoint)
    with _lock:
        found = _detected.get(key)
        if found is not None:
            _by_name.setdefault(endpoint.name, found)
            return found
        lock_key = (id(asyncio.get_running_loop()), *key)
        lock = _async_locks.setdefault(lock_key, asyncio.Lock())
    async with lock:
        with _lock:
            found = _detected.get(key)
        if found is not None:
            return _remember(endpoint, found)
        store = _store(endpoint, cache_root)
        detection = await detect(endpoint)
        if detection.source == "trial" and store is not None:
            await asyncio.to_thread(store.put, _store_key(endpoint), detection.to_dict())
        elif detection.source == "fallback" and store is not None:
            stored = await asyncio.to_thread(store.get, _store_key(endpoint))
            if isinstance(stored, dict) and stored.get("mode") in MODES:
                why = f"{detection.detail}; found earlier: {stored.get('detail', '')}"
                detection = Detection(stored["mode"], "remembered", why)
        log.info("judge endpoint %r: structured output %s", endpoint.name, detection.describe())
        return _remember(endpoint, detection)


def resolve_sync(endpoint: Endpoint, cache_root: Any = None) -> Detection:
    """`resolve` from synchronous code (`judgelab doctor`), on the judge loop."""
    from judgelab.evaluators.transport.loop import run_sync

    return run_sync(resolve(endpoint, cache_root))
