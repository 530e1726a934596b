"""judgelab's embedded server: real llama.cpp process, names checked, no orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from judgelab.config import EmbeddedModel, ServerSettings
from judgelab.errors import ModelError
from judgelab.models.client import chat
from judgelab.models.server import EmbeddedServer

pytestmark = pytest.mark.integration
SMOL = {"smollm2-135m": EmbeddedModel(zoo="smollm2-135m-instruct", family="smollm")}


def test_serves_seeded_completions_and_checks_names() -> None:
    with EmbeddedServer(SMOL, ServerSettings()) as server:
        ep = server.endpoint("smollm2-135m")
        assert ep.fingerprint.startswith("gguf:")
        msgs = [{"role": "user", "content": "Write a Python function that adds two numbers."}]
        a = chat(ep, msgs, temperature=1.0, max_tokens=24, seed=7)
        b = chat(ep, msgs, temperature=1.0, max_tokens=24, seed=7)
        assert a.text == b.text and a.completion_tokens > 0  # same seed, same sample
        with pytest.raises(ModelError, match="not served here"):
            server.endpoint("qwen-0.5b")
        url = server.base_url
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{url}/models", timeout=2)  # stopped with the context


CHILD = """
import sys, time
from judgelab.config import EmbeddedModel, ServerSettings
from judgelab.models.server import EmbeddedServer
with EmbeddedServer({"smollm2-135m": EmbeddedModel(zoo="smollm2-135m-instruct", family="smollm")},
                    ServerSettings()) as s:
    print(s._proc.pid, flush=True)
    time.sleep(600)
"""


def test_server_dies_with_a_killed_parent() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    server_pid = int(parent.stdout.readline())  # type: ignore[union-attr]
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{server_pid}/stat") as fh:
            if fh.read().split()[2] == "Z":
                return
        time.sleep(0.1)
    os.kill(server_pid, signal.SIGKILL)
    pytest.fail("llama.cpp server outlived its killed parent")
