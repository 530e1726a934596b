"""judgelab's embedded server: real llama.cpp process, names checked, no orphans."""

from __future__ import annotations

import json
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
        # no row of logits per prompt token (bench/prompt_logits.py): the server was told
        assert server._tmp is not None
        config = json.loads((Path(server._tmp.name) / "models.json").read_text())
        assert [m["logits_all"] for m in config["models"]] == [False]
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


def test_grammar_checked_after_sampling_gives_the_full_vocabulary_grammar_reply(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server checks the grammar on the sampled token only (as llama.cpp's server does):
    greedy replies under the RULER schema are those of the grammar applied to the whole
    vocabulary, the fallback to the whole vocabulary is taken, and sampled replies still
    follow the schema."""
    from art.rewards.ruler import Response
    from llama_cpp import Llama

    from judgelab.evaluators.transport.schema import bound_schema, inline_refs, reply_token_budget
    from judgelab.models import llama_server
    from judgelab.models.zoo import ensure_model

    llm = Llama(str(ensure_model("smollm2-135m-instruct")), n_ctx=1024, n_threads=2, verbose=False)
    schema = bound_schema(inline_refs(Response.model_json_schema()), 40, 2)
    messages = [
        {"role": "system", "content": "Score each trajectory between 0 and 1."},
        {"role": "user", "content": '<trajectory id="1">return a + b</trajectory>\n'
                                    '<trajectory id="2">return a - b</trajectory>'},
    ]  # fmt: skip

    def reply(temperature: float, seed: int) -> str:
        out = llm.create_chat_completion(
            messages=messages, response_format={"type": "json_object", "schema": schema},
            # the longest reply the bounded schema allows: at T = 1 a reply can run to it
            temperature=temperature, max_tokens=reply_token_budget(2, 40), seed=seed,
        )  # fmt: skip
        return out["choices"][0]["message"]["content"]

    whole_vocabulary = reply(0.0, 0)
    monkeypatch.setattr(Llama, "_init_sampler", llama_server._init_sampler)
    assert reply(0.0, 0) == whole_vocabulary
    assert isinstance(llm._sampler, llama_server.GrammarCheckedSampler)
    assert llm._sampler.rejections > 0  # the model's free choice was refused, then corrected
    for seed in range(3):
        parsed = Response.model_validate_json(reply(1.0, seed))
        assert len(parsed.scores) == 2


def test_ordered_ids_keep_smollm2_to_the_trajectory_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """RULER's ids as a tuple in the bounded schema (what json_object endpoints get): SmolLM2
    sampling at temperature 1 names trajectories 1..4 once each, in order, under it, while
    without it the same seeds invent ids (',', '1,', '') that cost the judge a retry each."""
    import json

    from art.rewards.ruler import Response
    from llama_cpp import Llama

    from judgelab.evaluators.transport.schema import bound_schema, inline_refs, reply_token_budget
    from judgelab.models import llama_server
    from judgelab.models.zoo import ensure_model

    monkeypatch.setattr(Llama, "_init_sampler", llama_server._init_sampler)
    llm = Llama(str(ensure_model("smollm2-135m-instruct")), n_ctx=2048, n_threads=2, verbose=False)
    code = "def add(a, b):\n    # add two numbers\n    return a + b{}\n"
    messages = [
        {"role": "system", "content": "Score each trajectory between 0 and 1 and explain briefly."},
        {"role": "user", "content": "Trajectories:\n\n" + "\n\n".join(
            f'<trajectory id="{i}">\n{code.format(" + 0" * i)}</trajectory>' for i in range(1, 5)
        )},
    ]  # fmt: skip
    ids = ("1", "2", "3", "4")
    schema = inline_refs(Response.model_json_schema())

    def named_ids(enum: tuple[str, ...] | None, seed: int) -> list[str]:
        rf = {"type": "json_object", "schema": bound_schema(schema, 60, 4, enum, ordered=True)}
        out = llm.create_chat_completion(
            messages=messages,
            response_format=rf,
            temperature=1.0,
            seed=seed,
            max_tokens=reply_token_budget(len(ids), 60),  # the longest reply the schema allows
        )
        text = out["choices"][0]["message"]["content"]
        return [s["trajectory_id"] for s in json.loads(text, strict=False)["scores"]]

    seeds = range(8)
    assert all(named_ids(ids, seed) == list(ids) for seed in seeds)
    assert any(not set(named_ids(None, seed)) <= set(ids) for seed in seeds)
