"""structured_output: auto against real loopback servers: the trial requests find the mode
once per endpoint and model, judge calls send it, the cache is shared with an explicit setting
that sends the same requests, and an explicit setting sends no trial request."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from judgelab.cache import JsonCache  # noqa: E402
from judgelab.evaluators.rubric import RubricJudge  # noqa: E402
from judgelab.evaluators.transport import detect  # noqa: E402
from judgelab.models.endpoint import Endpoint  # noqa: E402
from support.openai_server import (  # noqa: E402
    OpenAIServer,
    Reply,
    http_error,
    ok,
    rejects_json_schema,
)
from tests.unit.test_judges import TASK, candidates, rubric_spec  # noqa: E402

RUBRIC_REPLY = json.dumps({"explanation": "fine", "score": 0.75})


def judge_reply(body: dict[str, Any]) -> Reply:
    return ok(RUBRIC_REPLY)


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    detect.forget()
    yield
    detect.forget()


def endpoint(server: OpenAIServer, mode: str = "auto", name: str = "auto-judge") -> Endpoint:
    return Endpoint(
        name=name,
        base_url=server.base_url,
        model="judge-model",
        fingerprint=f"endpoint:{server.base_url}|judge-model",
        structured_output=mode,  # type: ignore[arg-type]
        timeout_s=10.0,
    )


def formats(server: OpenAIServer) -> list[str | None]:
    return [(r["body"].get("response_format") or {}).get("type") for r in server.requests]


def is_trial(request: dict[str, Any]) -> bool:
    return request["body"]["messages"] == detect.TRIAL_MESSAGES


def test_auto_finds_json_object_behind_a_llama_cpp_python_like_server(tmp_path: Path) -> None:
    cache = JsonCache(tmp_path, "judge")
    with OpenAIServer(rejects_json_schema(judge_reply)) as server:
        judge = RubricJudge(rubric_spec(), endpoint(server), cache)
        verdicts = [judge.score_group(TASK, [c])[0] for c in candidates(3)]
        assert [v.score for v in verdicts] == [0.75] * 3
        # two trial requests (json_schema rejected, json_object accepted), then only json_object
        trials = [r for r in server.requests if is_trial(r)]
        assert [(r["body"].get("response_format") or {}).get("type") for r in trials] == [
            "json_schema",
            "json_object",
        ]
        calls = [r for r in server.requests if not is_trial(r)]
        assert len(calls) == 3
        assert {r["body"]["response_format"]["type"] for r in calls} == {"json_object"}
        schema = calls[0]["body"]["response_format"]["schema"]
        assert schema["properties"]["explanation"]["maxLength"] == 120  # bounded strings
        found = detect.detections()["auto-judge"]
        assert found["mode"] == "json_object" and found["source"] == "trial"
        assert "json_schema rejected (HTTP 500" in found["detail"]

        # an explicit json_object sends the same requests: the same cache entries, no HTTP
        before = len(server.requests)
        explicit = RubricJudge(rubric_spec(), endpoint(server, "json_object", "set"), cache)
        assert [explicit.score_group(TASK, [c])[0].score for c in candidates(3)] == [0.75] * 3
        assert len(server.requests) == before


def test_auto_keeps_json_schema_where_it_is_taken_and_tries_once() -> None:
    with OpenAIServer(judge_reply) as server:
        ep = endpoint(server)
        judge = RubricJudge(rubric_spec(), ep, None)
        for c in candidates(2):
            assert judge.score_group(TASK, [c])[0].score == 0.75
        # a second judge on the same endpoint and model: no second trial request
        RubricJudge(rubric_spec(), endpoint(server, name="other"), None).score_group(
            TASK, candidates(1)
        )[0]
    assert formats(server) == ["json_schema"] * 4
    assert sum(is_trial(r) for r in server.requests) == 1
    assert detect.detections()["other"]["mode"] == "json_schema"


def test_auto_falls_back_to_text_and_validates_the_reply_the_same_way() -> None:
    def only_text(body: dict[str, Any]) -> Reply:
        if body.get("response_format"):
            return http_error(400, "response_format is not supported")
        return ok("Sure! " + RUBRIC_REPLY + " Hope that helps.")

    with OpenAIServer(only_text) as server:
        verdict = RubricJudge(rubric_spec(), endpoint(server), None).score_group(
            TASK, candidates(1)
        )[0]
    assert verdict.score == 0.75
    call = server.requests[-1]["body"]
    assert "response_format" not in call
    assert "It must match this JSON schema" in call["messages"][-1]["content"]
    assert detect.detections()["auto-judge"]["mode"] == "text"


def test_an_explicit_setting_sends_no_trial_request() -> None:
    with OpenAIServer(judge_reply) as server:
        RubricJudge(rubric_spec(), endpoint(server, "json_object"), None).score_group(
            TASK, candidates(1)
        )[0]
    assert not any(is_trial(r) for r in server.requests)
    assert detect.detections() == {}


def test_an_unreachable_endpoint_uses_the_mode_found_earlier(tmp_path: Path) -> None:
    with OpenAIServer(rejects_json_schema(judge_reply)) as server:
        ep = endpoint(server)
        assert detect.resolve_sync(ep, tmp_path).mode == "json_object"
    detect.forget()  # a later stage, the server now down (nothing listens on port 9)
    ep = replace(ep, base_url="http://127.0.0.1:9/v1")  # same fingerprint and model
    again = detect.resolve_sync(ep, tmp_path)
    assert (again.mode, again.source) == ("json_object", "remembered")
    assert "connection failed" in again.detail
    detect.forget()  # and without the record on disk: the default, saying why
    bare = detect.resolve_sync(ep, tmp_path / "elsewhere")
    assert (bare.mode, bare.source) == ("json_schema", "fallback")
    assert bare.describe().startswith("json_schema (not detected, default sent: trial with")
