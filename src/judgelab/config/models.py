"""The `models` registry (embedded GGUF models and OpenAI-compatible endpoints), the
embedded server and how a stage's units of work run (`server`, `runner`)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    Field,
    model_validator,
)

from judgelab.config.section import Section
from judgelab.errors import ConfigError
from judgelab.paths import project_root

log = logging.getLogger(__name__)

ZOO_NAMES = (
    "qwen2.5-coder-0.5b-instruct",
    "qwen2.5-coder-1.5b-instruct",
    "smollm2-135m-instruct",
    "gemma-3-270m",
)


# Requests in flight at once to an endpoint model that sets no max_concurrency, and to the
# embedded server, whose llama_cpp.server decodes one at a time. 1 suits the slowest server
# judgelab meets: a llama.cpp or Ollama server on a CPU answers one call at a time, and calls
# sent beside it only queue there until their timeouts run out (issue 65: 4 at once with a
# 120 s timeout left 2 of 7 rubric rows unscored on Qwen-0.5B). A server that batches (vLLM,
# OpenRouter) is faster with more: docs/ENDPOINTS.md says how many.
DEFAULT_ENDPOINT_CONCURRENCY = 1
# Seconds one request may take: RULER on Qwen2.5-Coder-1.5B judged a group of 8 in a median
# 54 s and up to 104 s on 2 Xeon cores, one call at a time (docs/BENCHMARKS.md, the reference
# audit); 300 leaves room for a slower CPU and a longer group.
DEFAULT_ENDPOINT_TIMEOUT_S = 300.0
EMBEDDED_CONCURRENCY = 1


class EmbeddedModel(Section):
    """A model shipped inside PyPI packages, served by judgelab's own llama.cpp server."""

    kind: Literal["embedded"] = "embedded"
    zoo: Literal[ZOO_NAMES]  # type: ignore[valid-type]
    family: str = Field(description="Model family, used by self-preference probes.")
    n_ctx: int = Field(4096, ge=512, le=32768)


class EndpointModel(Section):
    """Any OpenAI-compatible endpoint: OpenRouter, vLLM, Ollama, a llama.cpp server."""

    kind: Literal["endpoint"] = "endpoint"
    base_url: str = Field(
        description="e.g. https://openrouter.ai/api/v1 or http://127.0.0.1:8000/v1"
    )
    model: str = Field(description="Model name as the endpoint knows it.")
    api_key_env: str | None = Field(
        None, description="Name of the environment variable holding the API key (never the key)."
    )
    family: str = "unknown"
    structured_output: Literal["auto", "json_schema", "json_object", "text"] = Field(
        "auto",
        description="How the endpoint takes the judge's JSON schema: auto (found once per "
        "endpoint and model by a cheap probe request, remembered for the run; shown by "
        "`judgelab doctor` and in the report), OpenAI-style json_schema, "
        "llama-cpp-python-style json_object with a schema, or text (the schema in the "
        "prompt, the reply validated the same way). An explicit value wins.",
    )
    timeout_s: float = Field(
        DEFAULT_ENDPOINT_TIMEOUT_S,
        gt=0,
        description="Seconds one request may take before it is retried (the default suits a "
        "CPU server answering one call at a time; docs/ENDPOINTS.md).",
    )
    max_concurrency: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="At most this many requests in flight at once (unset: "
        f"{DEFAULT_ENDPOINT_CONCURRENCY}, for a server that answers one at a time; raise it "
        "for a server that batches: vLLM 16 or more, OpenRouter 4-8; docs/ENDPOINTS.md).",
    )
    requests_per_minute: int | None = Field(
        None, ge=1, description="At most this many requests start in any 60 s window."
    )
    tokens_per_minute: int | None = Field(
        None, ge=1, description="Token budget (prompt + completion) of any 60 s window."
    )
    price_per_million_prompt_tokens: float | None = Field(
        None,
        ge=0,
        description="What a million prompt tokens cost (your currency): the probe report's "
        "money per correctly ordered pass/fail pair. Never part of a run id or cache key.",
    )
    price_per_million_completion_tokens: float | None = Field(
        None, ge=0, description="What a million completion tokens cost (same currency)."
    )

    @model_validator(mode="after")
    def _no_inline_secret(self) -> EndpointModel:
        if self.api_key_env is not None and not self.api_key_env.replace("_", "").isalnum():
            raise ValueError(
                "api_key_env must be the NAME of an environment variable (e.g. OPENROUTER_API_KEY)"
            )
        return self

    def api_key(self, name: str) -> str | None:
        """The API key from the variable api_key_env names (None when the model needs none);
        a ConfigError naming `models.<name>.api_key_env` when that variable is unset or empty.
        """
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ConfigError(
                f"models.{name}.api_key_env: environment variable {self.api_key_env} is not set"
            )
        return key


# Client-side limits: they change how fast, never what, so no run id or cache key holds them.
# A call's timeout among them: a call it cuts short is retried or recorded unscored, never
# answered differently, and the unscored share is counted (`scores.max_failure_share`).
RATE_LIMIT_KEYS = frozenset(
    {"max_concurrency", "requests_per_minute", "tokens_per_minute", "timeout_s"}
)
# Prices: they change what a reply costs, never what it says; no run id or cache key holds them.
PRICE_KEYS = frozenset({"price_per_million_prompt_tokens", "price_per_million_completion_tokens"})

ModelSpec = Annotated[EmbeddedModel | EndpointModel, Field(discriminator="kind")]


class ServerSettings(Section):
    host: Literal["127.0.0.1"] = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535, description="0 picks a free port.")
    n_threads: int = Field(2, ge=1, le=256)
    startup_timeout_s: float = Field(120.0, gt=0)


class RunnerSettings(Section):
    """How a stage's units of work (score groups, rollout groups, probe views, a training
    epoch's judge and test calls) run: all at once up to each lane's limit (judgelab.flows.fanout),
    on Prefect's thread pool or on Dask."""

    kind: Literal["threads", "dask"] = Field(
        "threads",
        description="threads: Prefect's thread pool in the stage's process. dask: Prefect's "
        "DaskTaskRunner (install judgelab[dask]); a local cluster of worker processes, or "
        "the cluster at `address`.",
    )
    workers: int = Field(
        16,
        ge=1,
        le=1024,
        description="threads: pool size; dask: worker processes of the local cluster. Calls to "
        f"one endpoint model are further bounded by its max_concurrency "
        f"({DEFAULT_ENDPOINT_CONCURRENCY} when unset), the embedded server by "
        f"{EMBEDDED_CONCURRENCY}, local work (rules, sandbox) by the number of cores.",
    )
    threads_per_worker: int = Field(
        4, ge=1, le=256, description="dask local cluster: threads in each worker process."
    )
    address: str | None = Field(
        None,
        description="dask: the scheduler of an existing cluster, e.g. tcp://10.0.0.5:8786 "
        "(every worker needs judgelab installed and, for embedded models, this host's "
        "127.0.0.1; use endpoint models on a remote cluster).",
    )

    @model_validator(mode="after")
    def _address_is_dask(self) -> RunnerSettings:
        if self.address is not None and self.kind != "dask":
            raise ValueError("runner.address: only used with runner.kind: dask")
        return self


class CacheSettings(Section):
    """Caches other than this project's own `.cache`, read before a model is called. Speed
    only: a hit is the reply the same request got before (the key hashes everything that
    changes it), so no stage depends on this section and no run id holds it."""

    seeds: list[Path] = Field(
        default_factory=list,
        description="Cache folders read when this project's cache misses, relative to the "
        "project root (the default: reference/.cache, the committed reference audit's calls, "
        "so a first run on its tasks calls no model for them). Never written; each entry is "
        "verified before use and copied into .cache. A folder that does not exist is skipped "
        "with a warning. The report counts the calls each stage found in a seed.",
    )

    def seed_dirs(self, root: Path | None = None) -> list[Path]:
        """The seeds that exist, resolved against `root` (the project root by default)."""
        root = project_root() if root is None else root
        found = []
        for seed in self.seeds:
            path = seed if seed.is_absolute() else root / seed
            if path.is_dir():
                found.append(path.resolve())
            else:
                log.warning("cache.seeds: %s is not a folder; not read", path)
        return found
