"""judgelab's own OpenAI-compatible server for the embedded zoo, on 127.0.0.1.

One `llama_cpp.server` process serves every requested zoo model under its registry name
and keeps one loaded at a time (it swaps on demand); `judgelab.models.llama_server` starts
it with grammars checked after sampling, as llama.cpp's own server does. Only one such
process runs on the machine at once: two llama.cpp processes on two cores run ~300x slower,
so the server holds an exclusive lock file for its whole life and a second server waits.

The server silently falls back to its default model for an unknown name, so `Endpoint`s are
only ever built for the names this server was started with.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from judgelab.config import (
    EMBEDDED_CONCURRENCY,
    EmbeddedModel,
    EndpointModel,
    ServerSettings,
    Settings,
)
from judgelab.errors import ModelError
from judgelab.extras import require
from judgelab.lifetime import die_with_parent
from judgelab.models.endpoint import Endpoint
from judgelab.models.ratelimit import Limits
from judgelab.models.zoo import ZOO, ensure_model

log = logging.getLogger(__name__)

LOCK_PATH = Path(os.environ.get("JUDGELAB_LLAMA_LOCK", "/tmp/judgelab-llama.lock"))
# How judgelab.models.llama_server applies a JSON grammar (Endpoint.grammar_sampler).
GRAMMAR_SAMPLER = "checked-after-sampling"
# How every zoo model is created (bench/prompt_logits.py; docs/BENCHMARKS.md). llama_cpp.server
# computes a row of logits for every prompt token by default and copies it into an
# n_ctx x n_vocab array, in case a request asks for the prompt's log-probabilities; judgelab
# never does, and sampling reads the last row only. The replies are the same text; a judge
# call is 1.13-2.28x faster (the larger the vocabulary, the more).
LLAMA_OPTIONS = {"logits_all": False}


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class EmbeddedServer:
    """A running llama_cpp.server for a set of zoo models (use as a context manager)."""

    def __init__(self, models: dict[str, EmbeddedModel], settings: ServerSettings) -> None:
        if not models:
            raise ModelError("EmbeddedServer needs at least one model")
        self.models = models
        self.settings = settings
        self.base_url = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock: object | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def _config(self, port: int) -> dict:
        entries = []
        for alias, spec in self.models.items():
            zoo = ZOO[spec.zoo]
            entry = {
                "model": str(ensure_model(spec.zoo)),
                "model_alias": alias,
                "n_ctx": spec.n_ctx,
                "n_threads": self.settings.n_threads,
                "n_threads_batch": self.settings.n_threads,
                "verbose": False,
                **LLAMA_OPTIONS,
            }
            if zoo.chat_format:
                entry["chat_format"] = zoo.chat_format
            entries.append(entry)
        return {"host": self.settings.host, "port": port, "models": entries}

    def __enter__(self) -> EmbeddedServer:
        require("embedded", "serving the embedded models (llama.cpp)")
        LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
        lock = open(LOCK_PATH, "w")  # noqa: SIM115 - held for the server's lifetime
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("another llama.cpp server holds %s; waiting for it", LOCK_PATH)
            fcntl.flock(lock, fcntl.LOCK_EX)
        self._lock = lock
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        host = self.settings.host
        port = self.settings.port or _free_port(host)
        self._tmp = tempfile.TemporaryDirectory(prefix="judgelab-server-")
        cfg_path = Path(self._tmp.name) / "models.json"
        cfg_path.write_text(json.dumps(self._config(port)))
        log_path = Path(self._tmp.name) / "server.log"
        self._log = open(log_path, "wb")  # noqa: SIM115
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "judgelab.models.llama_server", "--config_file", str(cfg_path)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, before any thread runs there
        )
        self.base_url = f"http://{host}:{port}/v1"
        deadline = time.monotonic() + self.settings.startup_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise ModelError(
                    f"llama_cpp.server exited with {self._proc.returncode}:\n{self._tail(log_path)}"
                )
            with contextlib.suppress(httpx.HTTPError):
                r = httpx.get(f"{self.base_url}/models", timeout=2)
                if r.status_code == 200:
                    served = {m["id"] for m in r.json().get("data", [])}
                    missing = set(self.models) - served
                    if missing:
                        raise ModelError(
                            f"server does not list {sorted(missing)} (served: {served})"
                        )
                    log.info("embedded server up at %s with %s", self.base_url, sorted(served))
                    return
            time.sleep(0.25)
        raise ModelError(
            f"llama_cpp.server not ready after {self.settings.startup_timeout_s}s:\n"
            f"{self._tail(log_path)}"
        )

    @staticmethod
    def _tail(path: Path, n: int = 3000) -> str:
        try:
            return path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(timeout=10)
        self._proc = None
        if getattr(self, "_log", None):
            self._log.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
        if self._lock is not None:
            self._lock.close()  # type: ignore[attr-defined]
            self._lock = None

    def endpoint(self, name: str) -> Endpoint:
        if name not in self.models:
            raise ModelError(f"model {name!r} is not served here (serving {sorted(self.models)})")
        spec = self.models[name]
        zoo = ZOO[spec.zoo]
        return Endpoint(
            name=name,
            base_url=self.base_url,
            model=name,
            fingerprint=f"gguf:{zoo.sha256}",
            family=spec.family,
            structured_output="json_object",
            system_role=zoo.system_role,
            timeout_s=600.0,
            grammar_sampler=GRAMMAR_SAMPLER,
            limits=model_limits(spec),
        )


def model_limits(spec: EmbeddedModel | EndpointModel) -> Limits:
    """The client-side limits of requests to a registry model: the embedded server's one at a
    time, an endpoint model's configured ones."""
    if isinstance(spec, EmbeddedModel):
        return Limits(max_concurrency=EMBEDDED_CONCURRENCY)
    return Limits(spec.max_concurrency, spec.requests_per_minute, spec.tokens_per_minute)


def remote_endpoint(name: str, spec: EndpointModel) -> Endpoint:
    """An Endpoint for a configured remote model, its key read from the environment now."""
    key = spec.api_key(name)
    return Endpoint(
        name=name,
        base_url=spec.base_url.rstrip("/"),
        model=spec.model,
        fingerprint=f"endpoint:{spec.base_url.rstrip('/')}|{spec.model}",
        family=spec.family,
        structured_output=spec.structured_output,
        api_key=key,
        timeout_s=spec.timeout_s,
        limits=model_limits(spec),
    )


@contextlib.contextmanager
def serve(settings: Settings, names: list[str]) -> Iterator[dict[str, Endpoint]]:
    """Endpoints for the named registry models: starts the embedded server only if needed."""
    names = list(dict.fromkeys(names))
    specs = {n: settings.model(n) for n in names}
    embedded = {n: s for n, s in specs.items() if isinstance(s, EmbeddedModel)}
    endpoints = {n: remote_endpoint(n, s) for n, s in specs.items() if isinstance(s, EndpointModel)}
    if not embedded:
        yield endpoints
        return
    with EmbeddedServer(embedded, settings.server) as server:
        endpoints.update({n: server.endpoint(n) for n in embedded})
        yield endpoints
