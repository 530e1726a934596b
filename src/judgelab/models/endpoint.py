"""A resolved, callable model: the one shape embedded and remote models share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from judgelab.models.ratelimit import Limits, RateLimiter, limiter_for


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible chat endpoint, ready to call.

    `name` is the registry name (params.yaml), `model` the name the server knows.
    `fingerprint` identifies the weights (sha256 of an embedded GGUF, or base_url+model for a
    remote endpoint) and goes into every cache key. `grammar_sampler` names how the server
    applies a JSON grammar where judgelab runs the server (embedded models); it goes into
    judge-call cache keys, since it changes replies drawn at a temperature above 0. `api_key`
    is read from the environment at resolve time and must never be logged or stored.
    """

    name: str
    base_url: str
    model: str
    fingerprint: str
    family: str = "unknown"
    # "auto": found by probe (judgelab.evaluators.transport.detect)
    structured_output: Literal["auto", "json_schema", "json_object", "text"] = "json_schema"
    api_key: str | None = None
    timeout_s: float = 120.0
    system_role: bool = True  # False for chat templates that drop system messages (Gemma)
    grammar_sampler: str | None = None  # None: the server's own, unknown to judgelab
    limits: Limits = Limits()  # client-side request limits; never part of a cache key

    @property
    def limiter(self) -> RateLimiter | None:
        """The limiter every request to this endpoint goes through (shared per process)."""
        return limiter_for(self.name, self.base_url, self.model, self.limits)

    @property
    def concurrency(self) -> int:
        """How many requests judgelab keeps in flight to this endpoint at most."""
        return self.limits.concurrency

    def __repr__(self) -> str:  # never print the key
        return f"Endpoint(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r})"
