"""LLM judges against a real loopback HTTP server that speaks the chat-completions wire format.

The server replies from a script, so these tests are about judgelab's own logic: how requests
are adapted per endpoint kind, how scores are mapped back through shuffling, and what happens
when a judge misbehaves (wrong count, bad JSON, unknown ids, out-of-range scores, 429, 500).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import inspect  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Literal  # noqa: E402

import pytest  # noqa: E402

from judgelab.cache import JsonCache  # noqa: E402
from judgelab.config.evaluators import JudgeCallSettings, RubricSettings, RulerSettings  # noqa: E402
from judgelab.evaluators.rubric import RubricJudge  # noqa: E402
from judgelab.evaluators.ruler import RulerJudge  # noqa: E402
from judgelab.models.endpoint import Endpoint  # noqa: E402
from judgelab.verdicts import Candidate, Task  # noqa: E402
from support.openai_server import OpenAIServer, Reply  # noqa: E402


@pytest.fixture()
def server() -> Iterator[OpenAIServer]:
    s = OpenAIServer()
    yield s
    s.close()


SECRET = "sk-test-SECRET-0123456789"


def endpoint(
    server: OpenAIServer,
    mode: Literal["json_schema", "json_object", "text"] = "json_schema",
    *,
    system_role: bool = True,
    api_key: str | None = None,
    fingerprint: str = "fp-1",
) -> Endpoint:
    return Endpoint(
        name=f"test-judge-{mode}",
        base_url=server.base_url,
        model="judge-model",
        fingerprint=fingerprint,
        structured_output=mode,
        api_key=api_key,
        timeout_s=10.0,
        system_role=system_role,
    )


def call_settings(**kw: Any) -> JudgeCallSettings:
    return JudgeCallSettings(**{"backoff_s": 0.5, "retries": 2, **kw})


def ruler_spec(shuffle: bool = True, **call: Any) -> RulerSettings:
    return RulerSettings(name="ruler-test", judge="j", shuffle=shuffle, call=call_settings(**call))


def rubric_spec(**call: Any) -> RubricSettings:
    return RubricSettings(name="rubric-test", judge="j", call=call_settings(**call))


TASK = Task(task_id="t-1", source="autorl", prompt="write a function f that returns 1")


def candidates(k: int = 4, task: Task = TASK) -> list[Candidate]:
    prompt = [
        {"role": "system", "content": "You are a programmer."},
        {"role": "user", "content": task.prompt},
    ]
    return [
        Candidate(
            task_id=task.task_id,
            candidate_id=f"{task.task_id}-c{i}",
            sample_index=i,
            completion=f"def f():\n    return 1  # ANSWER-{i}",
            messages=prompt,
        )
        for i in range(k)
    ]


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def shown_order(body: dict[str, Any]) -> dict[str, int]:
    """trajectory id -> candidate index (from the ANSWER-i marker), as the judge saw them."""
    user = next(m for m in body["messages"] if m["role"] == "user")["content"]
    found = re.findall(r'<trajectory id="(\d+)">\n(.*?)\n</trajectory>', user, re.S)
    return {tid: int(re.search(r"ANSWER-(\d+)", text).group(1)) for tid, text in found}


def scores_json(items: list[tuple[str, float]], explanation: str = "ok") -> str:
    return json.dumps(
        {"scores": [{"trajectory_id": t, "explanation": explanation, "score": s} for t, s in items]}
    )


def score_by_candidate(
    score_of: Callable[[int], float], reverse: bool = True
) -> Callable[[dict[str, Any]], Reply]:
    """A reply that scores each candidate by its own index, listed in reverse id order."""

    def reply(body: dict[str, Any]) -> Reply:
        order = shown_order(body)
        items = [(tid, score_of(i)) for tid, i in order.items()]
        if reverse:
            items.reverse()
        return {"content": scores_json(items, explanation="because")}

    return reply


# --- RULER: shuffling and id mapping ---------------------------------------------------------


def test_shuffle_stores_permutation_and_maps_scores_back_by_id(server: OpenAIServer) -> None:
    tasks = [Task(task_id=f"t-{n}", source="autorl", prompt="write f") for n in range(6)]
    server.add(*[score_by_candidate(lambda i: (i + 1) / 10) for _ in tasks])
    judge = RulerJudge(ruler_spec(shuffle=True), endpoint(server))
    permutations = []
    for task in tasks:
        cands = candidates(4, task)
        verdicts = judge.score_group(task, cands)
        assert [v.status for v in verdicts] == ["scored"] * 4
        assert [v.score for v in verdicts] == [0.1, 0.2, 0.3, 0.4]
        perm = verdicts[0].permutation
        assert perm is not None and sorted(perm.split(",")) == ["0", "1", "2", "3"]
        for c, v in zip(cands, verdicts, strict=True):
            assert v.permutation == perm
            assert perm.split(",")[v.slot] == str(c.sample_index)
            assert v.explanation == "because"
        permutations.append(perm)
    assert len(server.requests) == len(tasks)
    # the order shown to the judge is the stored permutation
    for req, perm in zip(server.requests, permutations, strict=True):
        order = shown_order(req["body"])
        assert ",".join(str(order[str(t)]) for t in range(1, 5)) == perm
    assert any(p != "0,1,2,3" for p in permutations), "shuffle never changed the order"
    # seeded: the same task and repeat give the same order again
    again = RulerJudge(ruler_spec(shuffle=True), endpoint(server))
    assert again.order(tasks[0], 4, 0, 0) == judge.order(tasks[0], 4, 0, 0)
    assert judge.order(tasks[0], 4, 0, 0) != judge.order(tasks[0], 4, 0, 1) or judge.order(
        tasks[0], 4, 1, 0
    ) != judge.order(tasks[0], 4, 0, 0)


def test_without_shuffle_the_order_is_the_sample_order(server: OpenAIServer) -> None:
    server.add(score_by_candidate(lambda i: 0.5 + i / 10))
    verdicts = RulerJudge(ruler_spec(shuffle=False), endpoint(server)).score_group(
        TASK, candidates(3)
    )
    assert [v.score for v in verdicts] == [0.5, 0.6, 0.7]
    assert [v.slot for v in verdicts] == [0, 1, 2]
    assert {v.permutation for v in verdicts} == {"0,1,2"}


@pytest.mark.parametrize(("k", "chars"), [(1, 16), (4, 120), (8, 300)])
def test_unset_max_tokens_fits_the_longest_reply_the_schema_allows(
    server: OpenAIServer, k: int, chars: int
) -> None:
    """At one token per character (a small model can do that: Gemma-3 writes digits one
    token each), the longest reply the bounded schema allows must fit in the budget sent."""
    server.add(score_by_candidate(lambda i: 0.5))
    RulerJudge(ruler_spec(explanation_max_chars=chars), endpoint(server)).score_group(
        TASK, candidates(k)
    )
    budget = server.requests[0]["body"]["max_tokens"]
    number = "-" + "9" * 16 + "." + "9" * 16 + "e+" + "9" * 16  # llama.cpp's longest number
    item = {"trajectory_id": "9" * 8, "explanation": "0" * chars, "score": 0.0}
    longest = json.dumps({"scores": [item] * k}, indent=1).replace("0.0", number)
    assert len(longest) <= budget < 2 * len(longest)


def test_rubric_unset_max_tokens_fits_its_reply(server: OpenAIServer) -> None:
    server.add(rubric_reply(0.5))
    RubricJudge(rubric_spec(explanation_max_chars=64), endpoint(server)).judge_group(
        TASK, candidates(1)
    )
    assert server.requests[0]["body"]["max_tokens"] >= 64 + 100


def test_identical_trajectories_get_the_single_score(server: OpenAIServer) -> None:
    same = [
        Candidate("t-1", f"c{i}", i, "def f():\n    return 1", [{"role": "user", "content": "f"}])
        for i in range(3)
    ]
    server.add({"content": scores_json([("1", 0.8)])})
    verdicts = RulerJudge(ruler_spec(), endpoint(server)).score_group(TASK, same)
    assert [v.score for v in verdicts] == [0.8, 0.8, 0.8]
    schema = server.requests[0]["body"]["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["scores"]["maxItems"] == 1
    assert _trajectory_score_schema(schema)["properties"]["trajectory_id"]["enum"] == ["1"]


# --- out-of-range and non-finite scores -----------------------------------------------------


@pytest.mark.parametrize("policy", ["unscore", "clip"])
def test_out_of_range_scores_follow_the_policy(server: OpenAIServer, policy: str) -> None:
    raw = {0: 184.0, 1: -5.0, 2: 0.25, 3: 1.0}
    server.add(score_by_candidate(lambda i: raw[i]))
    judge = RulerJudge(ruler_spec(out_of_range=policy), endpoint(server))
    verdicts = judge.score_group(TASK, candidates(4))
    assert [v.raw_score for v in verdicts] == [184.0, -5.0, 0.25, 1.0]
    assert [v.out_of_range for v in verdicts] == [True, True, False, False]
    assert verdicts[2].score == 0.25 and verdicts[3].score == 1.0
    if policy == "unscore":
        assert verdicts[0].status == "unscored" and verdicts[0].score is None
        assert verdicts[0].reason == "out of range: raw score 184"
        assert verdicts[1].reason == "out of range: raw score -5"
    else:
        assert (verdicts[0].status, verdicts[0].score) == ("scored", 1.0)
        assert (verdicts[1].status, verdicts[1].score) == ("scored", 0.0)
    assert len(server.requests) == 1, "an out-of-range score is data, not a reason to retry"


def test_non_finite_score_is_unscored(server: OpenAIServer) -> None:
    content = (
        '{"scores": [{"trajectory_id": "1", "explanation": "x", "score": NaN},'
        ' {"trajectory_id": "2", "explanation": "y", "score": 0.5}]}'
    )
    server.add({"content": content})
    verdicts = RulerJudge(ruler_spec(shuffle=False), endpoint(server)).score_group(
        TASK, candidates(2)
    )
    assert verdicts[0].status == "unscored" and "non-finite" in (verdicts[0].reason or "")
    assert verdicts[1].score == 0.5


# --- malformed replies: retried with backoff, then unscored ---------------------------------


BAD_REPLIES: dict[str, tuple[Reply, str]] = {
    "wrong count": ({"content": scores_json([("1", 0.5), ("2", 0.5), ("3", 0.5)])}, "Expected 4"),
    "invalid json": ({"content": '{"scores": [{"trajectory_id": "1", "expl'}, "invalid JSON"),
    "schema mismatch": ({"content": '{"ratings": [1, 2, 3, 4]}'}, "schema mismatch"),
    "unknown id": (
        {"content": scores_json([("1", 0.5), ("2", 0.5), ("3", 0.5), ("7", 0.5)])},
        "unknown trajectory_id '7'",
    ),
    "duplicate id": (
        {"content": scores_json([("1", 0.5), ("2", 0.5), ("2", 0.5), ("3", 0.5)])},
        "duplicate trajectory_id '2'",
    ),
    "empty": ({"content": ""}, "empty reply"),
}


@pytest.mark.parametrize("case", sorted(BAD_REPLIES))
def test_bad_replies_are_retried_with_backoff_then_unscored(
    server: OpenAIServer, case: str
) -> None:
    reply, expected = BAD_REPLIES[case]
    server.add(reply, reply, reply)
    sleeps = Sleeps()
    judge = RulerJudge(ruler_spec(retries=2, backoff_s=0.5), endpoint(server), sleep=sleeps)
    result = judge.judge_group(TASK, candidates(4))
    assert len(server.requests) == 3
    assert sleeps.calls == [0.5, 1.0]
    seeds = [r["body"]["seed"] for r in server.requests]
    assert len(set(seeds)) == 3, "each retry must ask with a new seed"
    for v in result.verdicts:
        assert v.status == "unscored" and v.score is None
        assert v.reason is not None and "after 3 attempts" in v.reason and expected in v.reason
        if reply["content"]:
            # The tail of the raw reply, marked "… " when cut to explanation_max_chars.
            tail = (v.explanation or "").removeprefix("… ")
            assert tail and reply["content"].endswith(tail)
    assert [r.raw for r in result.records] == [reply["content"]] * 3


def test_bad_reply_then_good_reply_scores(server: OpenAIServer) -> None:
    server.add({"content": "not json"}, score_by_candidate(lambda i: 0.9))
    sleeps = Sleeps()
    result = RulerJudge(ruler_spec(), endpoint(server), sleep=sleeps).judge_group(
        TASK, candidates(2)
    )
    assert [v.score for v in result.verdicts] == [0.9, 0.9]
    assert len(server.requests) == 2 and sleeps.calls == [0.5]
    assert result.records[0].raw == "not json" and result.records[1].raw.startswith('{"scores"')


def test_429_honours_retry_after_and_500_is_retried(server: OpenAIServer) -> None:
    server.add(
        {
            "status": 429,
            "text": '{"error": {"message": "slow down"}}',
            "headers": {"Retry-After": "7"},
        },
        {"status": 500, "text": '{"error": {"message": "boom"}}'},
        score_by_candidate(lambda i: 0.3),
    )
    sleeps = Sleeps()
    verdicts = RulerJudge(ruler_spec(retries=2), endpoint(server), sleep=sleeps).score_group(
        TASK, candidates(2)
    )
    assert [v.score for v in verdicts] == [0.3, 0.3]
    assert len(server.requests) == 3
    assert sleeps.calls == [7.0, 1.0]  # Retry-After beats the 0.5 s backoff; then 0.5 * 2


def test_transport_errors_exhaust_retries_into_unscored(server: OpenAIServer) -> None:
    server.add(*[{"status": 503, "text": "{}"}] * 3)
    verdicts = RulerJudge(ruler_spec(retries=2), endpoint(server), sleep=Sleeps()).score_group(
        TASK, candidates(2)
    )
    assert len(server.requests) == 3
    assert all(v.status == "unscored" and "HTTP 503" in (v.reason or "") for v in verdicts)


def test_client_error_is_not_retried(server: OpenAIServer) -> None:
    server.add({"status": 400, "text": '{"error": {"message": "bad schema"}}'})
    sleeps = Sleeps()
    verdicts = RulerJudge(ruler_spec(retries=2), endpoint(server), sleep=sleeps).score_group(
        TASK, candidates(2)
    )
    assert len(server.requests) == 1 and sleeps.calls == []
    assert all("HTTP 400" in (v.reason or "") for v in verdicts)
    assert all("after 1 attempt:" in (v.reason or "") for v in verdicts)


def test_connection_refused_is_transient_then_unscored() -> None:
    s = OpenAIServer()
    ep = endpoint(s)
    s.close()
    sleeps = Sleeps()
    verdicts = RulerJudge(ruler_spec(retries=1), ep, sleep=sleeps).score_group(TASK, candidates(2))
    assert sleeps.calls == [0.5]
    assert all("connection failed" in (v.reason or "") for v in verdicts)


# --- request bodies per endpoint kind ------------------------------------------------------


def _trajectory_score_schema(schema: dict[str, Any]) -> dict[str, Any]:
    items = schema["properties"]["scores"]["items"]
    if "$ref" in items:
        return schema["$defs"][items["$ref"].split("/")[-1]]
    return items


def test_json_schema_request_passes_the_schema_through_with_bounds(
    server: OpenAIServer,
) -> None:
    server.add(score_by_candidate(lambda i: 0.5))
    spec = ruler_spec(explanation_max_chars=123, temperature=0.0, max_tokens=321, seed=5)
    RulerJudge(spec, endpoint(server, "json_schema")).score_group(TASK, candidates(3))
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    body = req["body"]
    assert body["model"] == "judge-model"
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.0, 321, 5)
    rf = body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["name"] == "Response"
    schema = rf["json_schema"]["schema"]
    item = _trajectory_score_schema(schema)
    assert item["properties"]["explanation"]["maxLength"] == 123
    assert item["properties"]["trajectory_id"]["maxLength"] == 8
    assert item["properties"]["trajectory_id"]["enum"] == ["1", "2", "3"]
    assert (
        "maxLength" not in item["properties"]["score"]
        and "maximum" not in item["properties"]["score"]
    )
    assert schema["properties"]["scores"]["minItems"] == 3
    assert schema["properties"]["scores"]["maxItems"] == 3
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    assert body["messages"][0]["content"].strip().startswith("All of the trajectories below")


def test_json_object_request_inlines_the_schema(server: OpenAIServer) -> None:
    server.add(score_by_candidate(lambda i: 0.5))
    spec = ruler_spec(explanation_max_chars=77)
    verdicts = RulerJudge(spec, endpoint(server, "json_object")).score_group(TASK, candidates(2))
    assert all(v.status == "scored" for v in verdicts)
    rf = server.requests[0]["body"]["response_format"]
    assert rf["type"] == "json_object" and set(rf) == {"type", "schema"}
    assert "$defs" not in json.dumps(rf["schema"]) and "$ref" not in json.dumps(rf["schema"])
    scores = rf["schema"]["properties"]["scores"]
    assert "items" not in scores, "a tuple of items, one per trajectory id, in order"
    assert [i["properties"]["trajectory_id"]["enum"] for i in scores["prefixItems"]] == [
        ["1"],
        ["2"],
    ]
    for item in scores["prefixItems"]:
        assert item["properties"]["explanation"]["maxLength"] == 77
        assert item["properties"]["trajectory_id"]["maxLength"] == 8
        assert item["required"] == ["trajectory_id", "explanation", "score"]


def test_prompt_only_request_asks_for_json_and_extracts_it(server: OpenAIServer) -> None:
    def fenced(body: dict[str, Any]) -> Reply:
        inner = score_by_candidate(lambda i: 0.4)(body)["content"]
        return {"content": f"Sure! Here are the scores:\n```json\n{inner}\n```\nHope it helps."}

    server.add(fenced)
    result = RulerJudge(ruler_spec(), endpoint(server, "text")).judge_group(TASK, candidates(2))
    assert [v.score for v in result.verdicts] == [0.4, 0.4]
    body = server.requests[0]["body"]
    assert "response_format" not in body
    last_user = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    assert "Reply with one JSON object and nothing else" in last_user
    schema = json.loads(last_user.rsplit("JSON schema:\n", 1)[1])
    explanation = schema["properties"]["scores"]["prefixItems"][0]["properties"]["explanation"]
    assert explanation["maxLength"] == JudgeCallSettings().explanation_max_chars
    assert result.records[0].raw.startswith("Sure!"), "the raw reply is kept as written"


def test_system_messages_are_merged_for_templates_without_a_system_role(
    server: OpenAIServer,
) -> None:
    server.add(score_by_candidate(lambda i: 0.5))
    ep = endpoint(server, "json_object", system_role=False)
    RulerJudge(ruler_spec(), ep).score_group(TASK, candidates(2))
    messages = server.requests[0]["body"]["messages"]
    assert [m["role"] for m in messages] == ["user"]
    content = messages[0]["content"]
    assert content.strip().startswith("All of the trajectories below")
    assert "Grading standards" in content and "<trajectory id=" in content


# --- cache ---------------------------------------------------------------------------------


def test_second_identical_run_is_served_from_the_cache(
    server: OpenAIServer, tmp_path: Path
) -> None:
    server.add(score_by_candidate(lambda i: i / 4))
    cache = JsonCache(tmp_path, "judge")
    first = RulerJudge(ruler_spec(), endpoint(server), cache).score_group(TASK, candidates(4))
    assert len(server.requests) == 1
    again = RulerJudge(ruler_spec(), endpoint(server), JsonCache(tmp_path, "judge"))
    result = again.judge_group(TASK, candidates(4))
    assert len(server.requests) == 1, "a cache hit must not make an HTTP request"
    assert [v.score for v in result.verdicts] == [v.score for v in first]
    assert [v.permutation for v in result.verdicts] == [v.permutation for v in first]
    assert result.records[0].cached and result.records[0].http_requests == 0

    # anything that changes the output changes the key: another fingerprint is a miss
    server.add(score_by_candidate(lambda i: 0.5))
    other = endpoint(server, fingerprint="fp-2")
    RulerJudge(ruler_spec(), other, JsonCache(tmp_path, "judge")).score_group(TASK, candidates(4))
    assert len(server.requests) == 2
    # ... and so is another grammar sampler on the same weights (the embedded server's)
    server.add(score_by_candidate(lambda i: 0.5))
    checked = replace(endpoint(server), grammar_sampler="checked-after-sampling")
    RulerJudge(ruler_spec(), checked, JsonCache(tmp_path, "judge")).score_group(TASK, candidates(4))
    assert len(server.requests) == 3


def test_identical_calls_in_flight_together_send_one_request(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """Four threads judge the same group at once on a cold cache (identical candidates are
    common in GRPO groups): one HTTP request, every caller gets its reply, and the three
    that sent none say so. A second, different call in flight beside them is sent."""
    slow = score_by_candidate(lambda i: i / 4)
    server.add(lambda body: {**slow(body), "delay_s": 0.5})
    server.add(lambda body: {**slow(body), "delay_s": 0.5})
    judge = RulerJudge(ruler_spec(retries=0), endpoint(server), JsonCache(tmp_path, "judge"))
    other = Task(task_id="t-2", source="autorl", prompt="write a function g")
    jobs = [TASK] * 4 + [other]
    with ThreadPoolExecutor(5) as pool:
        results = list(pool.map(lambda t: judge.judge_group(t, candidates(3, t)), jobs))
    assert len(server.requests) == 2 and server.max_in_flight == 2
    same = results[:4]
    assert all([v.score for v in r.verdicts] == [0.0, 0.25, 0.5] for r in same)
    assert sorted(r.records[0].http_requests for r in same) == [0, 0, 0, 1]
    assert sorted(r.records[0].cached for r in same) == [False, True, True, True]
    assert len({r.records[0].cache_key for r in same}) == 1
    assert results[4].records[0].http_requests == 1


def test_ruler_rubric_is_a_setting_in_the_prompt_and_the_cache_key(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """RULER's rubric (ART's `rubric` argument) reaches the judge; another rubric is another
    judge call (a cache miss), the same one a hit; unset, ART's default rubric is sent."""
    from art.rewards.ruler import ruler

    default = inspect.signature(ruler).parameters["rubric"].default
    strict = "- Code that would fail its tests must score below 0.2, whatever it claims."
    cache = JsonCache(tmp_path, "judge")
    for rubric in (None, strict, strict):
        server.add(score_by_candidate(lambda i: i / 4))
        spec = RulerSettings(name="ruler-test", judge="j", rubric=rubric, call=call_settings())
        RulerJudge(spec, endpoint(server), cache).score_group(TASK, candidates(4))
    assert len(server.requests) == 2  # the third call was the second's, from the cache
    prompts = [json.dumps(r["body"]["messages"]) for r in server.requests]
    assert json.dumps(default.strip())[1:-1] in prompts[0] and strict not in prompts[0]
    assert strict in prompts[1]


def test_rubric_judge_rubric_is_a_setting_in_the_prompt_the_cache_key_and_the_run_id(
    server: OpenAIServer, tmp_path: Path
) -> None:
    """The rubric judge's rubric replaces judgelab's own, taken as written (braces too), with
    the reply format kept; another rubric is a cache miss, the same one a hit."""
    from judgelab.evaluators.rubric import DEFAULT_RUBRIC

    mine = "Score 1.0 only if {every} branch is tested; else 0.0."
    cache = JsonCache(tmp_path, "judge")
    for rubric in (None, mine, mine):
        server.add(rubric_reply(0.5))
        spec = RubricSettings(name="rubric-test", judge="j", rubric=rubric, call=call_settings())
        RubricJudge(spec, endpoint(server), cache).judge_group(TASK, candidates(1))
    assert len(server.requests) == 2
    users = [r["body"]["messages"][-1]["content"] for r in server.requests]
    assert DEFAULT_RUBRIC.strip() in users[0] and mine not in users[0]
    assert mine in users[1] and DEFAULT_RUBRIC.strip() not in users[1]
    assert all('"score": <a number from 0 to 1>' in u for u in users)

    assert RubricSettings(name="r", judge="j").model_dump(mode="json")["rubric"] is None
    assert RubricSettings(name="r", judge="j", rubric=mine).model_dump()["rubric"] == mine
    with pytest.raises(ValueError, match="rubric"):
        RubricSettings(name="r", judge="j", rubric="")


def test_a_cached_bad_reply_is_not_replayed_on_retry(server: OpenAIServer, tmp_path: Path) -> None:
    bad = {"content": "I think they are all fine."}
    server.add(bad)
    cands = candidates(3)
    once = RulerJudge(ruler_spec(retries=0), endpoint(server), JsonCache(tmp_path, "judge"))
    assert all(v.status == "unscored" for v in once.score_group(TASK, cands))
    assert len(server.requests) == 1

    server.add(score_by_candidate(lambda i: 0.7))
    twice = RulerJudge(
        ruler_spec(retries=1), endpoint(server), JsonCache(tmp_path, "judge"), sleep=Sleeps()
    )
    result = twice.judge_group(TASK, cands)
    assert [v.score for v in result.verdicts] == [0.7] * 3
    assert len(server.requests) == 2, "attempt 0 from the cache, attempt 1 over HTTP"
    assert result.records[0].cached and result.records[0].raw == bad["content"]
    assert not result.records[1].cached
    assert server.requests[0]["body"]["seed"] != server.requests[1]["body"]["seed"]


# --- secrets ------------------------------------------------------------------------------


def test_api_key_is_sent_as_bearer_and_never_logged_or_stored(
    server: OpenAIServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.add({"status": 500, "text": "{}"}, score_by_candidate(lambda i: 0.6))
    ep = endpoint(server, api_key=SECRET)
    judge = RulerJudge(ruler_spec(), ep, JsonCache(tmp_path, "judge"), sleep=Sleeps())
    result = judge.judge_group(TASK, candidates(2))
    assert [v.score for v in result.verdicts] == [0.6, 0.6]
    assert all(r["headers"]["authorization"] == f"Bearer {SECRET}" for r in server.requests)
    assert all(SECRET not in json.dumps(r["body"]) for r in server.requests)
    assert SECRET not in repr(ep) and SECRET not in repr(judge)
    assert SECRET not in repr(result) and SECRET not in json.dumps(
        [c.to_dict() for c in result.records]
    )
    assert SECRET not in caplog.text
    for path in tmp_path.rglob("*.json"):
        assert SECRET not in path.read_text()


def test_no_api_key_means_no_real_key_is_sent(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.add(score_by_candidate(lambda i: 0.6))
    RulerJudge(ruler_spec(), endpoint(server)).score_group(TASK, candidates(2))
    assert SECRET not in server.requests[0]["headers"].get("authorization", "")


# --- threads and event loops --------------------------------------------------------------


def test_judges_run_from_worker_threads_and_inside_an_event_loop(server: OpenAIServer) -> None:
    import asyncio

    tasks = [Task(task_id=f"t-{n}", source="autorl", prompt="write f") for n in range(4)]
    server.add(*[score_by_candidate(lambda i: 0.5) for _ in range(5)])
    judge = RulerJudge(ruler_spec(), endpoint(server))
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda t: judge.score_group(t, candidates(3, t)), tasks))
    assert all(v.score == 0.5 for vs in results for v in vs)

    async def inside_loop() -> list[float | None]:
        return [v.score for v in judge.score_group(TASK, candidates(2))]

    assert asyncio.run(inside_loop()) == [0.5, 0.5]


# --- rubric judge -------------------------------------------------------------------------


def rubric_reply(score: float, explanation: str = "runs and is correct") -> Reply:
    return {"content": json.dumps({"explanation": explanation, "score": score})}


def test_rubric_scores_one_candidate_with_the_code_review_prompt(server: OpenAIServer) -> None:
    server.add(rubric_reply(0.85))
    cand = candidates(1)[0]
    judge = RubricJudge(rubric_spec(explanation_max_chars=64), endpoint(server, "json_object"))
    assert judge.protocol == "rubric" and judge.name == "rubric-test"
    result = judge.judge_group(TASK, [cand])
    v = result.verdicts[0]
    assert (v.status, v.score, v.raw_score, v.explanation) == (
        "scored",
        0.85,
        0.85,
        "runs and is correct",
    )
    body = server.requests[0]["body"]
    user = body["messages"][-1]["content"]
    assert TASK.prompt in user and "ANSWER-0" in user
    assert "Correctness" in user and "would it run as written" in user.lower()
    rf = body["response_format"]
    assert rf["type"] == "json_object"
    assert rf["schema"]["properties"]["explanation"]["maxLength"] == 64
    assert rf["schema"]["required"] == ["explanation", "score"]
    assert result.records[0].raw == rubric_reply(0.85)["content"]
    assert (result.records[0].prompt_tokens, result.records[0].completion_tokens) == (11, 7)


@pytest.mark.parametrize("policy", ["unscore", "clip"])
def test_rubric_out_of_range(server: OpenAIServer, policy: str) -> None:
    server.add(rubric_reply(7.0))
    v = RubricJudge(rubric_spec(out_of_range=policy), endpoint(server)).score_group(
        TASK, candidates(1)
    )[0]
    assert v.out_of_range and v.raw_score == 7.0
    if policy == "unscore":
        assert v.status == "unscored" and v.reason == "out of range: raw score 7"
    else:
        assert v.status == "scored" and v.score == 1.0


def test_rubric_retries_bad_json_then_unscored(server: OpenAIServer) -> None:
    server.add({"content": "score: great"}, {"content": '{"score": "high"}'})
    sleeps = Sleeps()
    v = RubricJudge(rubric_spec(retries=1), endpoint(server), sleep=sleeps).score_group(
        TASK, candidates(1)
    )[0]
    assert len(server.requests) == 2 and sleeps.calls == [0.5]
    assert v.status == "unscored" and "after 2 attempts" in (v.reason or "")
    assert v.explanation == '{"score": "high"}'


def test_rubric_prompt_only_endpoint_with_merged_system(server: OpenAIServer) -> None:
    server.add({"content": "```json\n" + rubric_reply(0.2)["content"] + "\n```"})
    ep = endpoint(server, "text", system_role=False)
    v = RubricJudge(rubric_spec(), ep).score_group(TASK, candidates(1))[0]
    assert v.score == 0.2
    body = server.requests[0]["body"]
    assert "response_format" not in body
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert body["messages"][0]["content"].startswith("You are a strict senior software engineer")


def test_rubric_cache_and_repeat(server: OpenAIServer, tmp_path: Path) -> None:
    server.add(rubric_reply(0.5), rubric_reply(0.6))
    cand = candidates(1)[0]
    judge = RubricJudge(rubric_spec(), endpoint(server), JsonCache(tmp_path, "judge"))
    assert judge.score_group(TASK, [cand])[0].score == 0.5
    assert judge.score_group(TASK, [cand])[0].score == 0.5
    assert len(server.requests) == 1
    assert judge.score_group(TASK, [cand], repeat=1)[0].score == 0.6, (
        "a repeat samples the judge again"
    )
    assert len(server.requests) == 2


def test_raw_control_characters_in_json_strings_are_tolerated() -> None:
    from judgelab.evaluators.transport.schema import normalize_json

    raw = '{"explanation": "line one\nline two\tend", "score": 0.5}'
    assert json.loads(normalize_json(raw)) == {
        "explanation": "line one\nline two\tend",
        "score": 0.5,
    }
    assert normalize_json('{"score": 1}') == '{"score": 1}'
    assert normalize_json("not json {") == "not json {"


def test_a_call_outside_judge_call_gets_a_complete_context(server: OpenAIServer) -> None:
    """litellm called directly (no judge_call) still reaches the endpoint; the fallback
    context once passed 5 of its 6 fields and raised TypeError."""
    import asyncio

    import litellm

    from judgelab.evaluators.transport.provider import register_endpoint

    server.add({"content": "plain reply"})
    model = register_endpoint(endpoint(server, "text"))
    reply = asyncio.run(
        litellm.acompletion(model=model, messages=[{"role": "user", "content": "hi"}])
    )
    assert reply.choices[0].message.content == "plain reply"


def test_a_judge_is_ready_before_its_first_call(server: OpenAIServer) -> None:
    """Building a judge builds its endpoint's client on the judge loop and loads what the
    first call would load (docs/BENCHMARKS.md, scaling: in a concurrent lane the whole first
    wave waited behind it); it sends nothing."""
    import litellm.main

    from judgelab.evaluators.transport.loop import _judge_loop
    from judgelab.models import client

    ep = endpoint(server)
    loop_id = id(_judge_loop())
    built = lambda: [k for k in client._clients if k[0] == "AsyncOpenAI" and k[1] == loop_id  # noqa: E731
                     and k[3] == ep.base_url]  # fmt: skip
    assert built() == []
    RulerJudge(ruler_spec(), ep)
    assert len(built()) == 1 and "encoding" in vars(litellm.main)  # tiktoken's, loaded
    RubricJudge(rubric_spec(), ep)  # the same endpoint: prepared once, one client
    assert len(built()) == 1
    assert server.requests == []
