"""The completion cache: content-addressed by exactly what changes a sample.

Key = model fingerprint (GGUF sha256, or endpoint URL + model name), the messages, the
sampling parameters, the seed and the sample index — never timeouts, retries or the
server's address. A finished sample is written atomically the moment it arrives, so an
interrupted run recomputes only the samples it had not finished.
"""

from __future__ import annotations

from typing import Any

from judgelab.cache import JsonCache
from judgelab.models.client import chat
from judgelab.models.endpoint import Endpoint


def completion_key(
    endpoint: Endpoint,
    messages: list[dict],
    *,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int,
    sample_index: int = 0,
) -> dict[str, Any]:
    return {
        "kind": "chat-completion/v1",
        "model": endpoint.fingerprint,
        "model_name": endpoint.model if endpoint.fingerprint.startswith("endpoint:") else None,
        "system_role": endpoint.system_role,
        "messages": messages,
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": max_tokens,
        "seed": seed,
        "sample_index": sample_index,
    }


def cached_chat(
    cache: JsonCache,
    endpoint: Endpoint,
    messages: list[dict],
    *,
    temperature: float,
    top_p: float,
    max_tokens: int,
    seed: int,
    sample_index: int = 0,
) -> dict[str, Any]:
    """A completion as a dict: text, finish_reason, completion_tokens, latency_s, cache_key,
    cached."""
    key = completion_key(
        endpoint,
        messages,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        seed=seed,
        sample_index=sample_index,
    )
    key_hash = cache.key_hash(key)
    hit = cache.get(key)
    if hit is not None:
        return {**hit, "cache_key": key_hash, "cached": True}
    out = chat(
        endpoint, messages, temperature=temperature, top_p=top_p, max_tokens=max_tokens, seed=seed
    )
    value = {
        "text": out.text,
        "finish_reason": out.finish_reason,
        "completion_tokens": out.completion_tokens,
        "latency_s": round(out.latency_s, 3),
    }
    cache.put(key, value)
    return {**value, "cache_key": key_hash, "cached": False}
