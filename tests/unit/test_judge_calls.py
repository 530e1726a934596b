"""What the probes learn from an evaluator without asking its kind: the settings they judge
with (`in_given_order`) and the calls it made (`judge_group` -> the probe calls table)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json  # noqa: E402
import re  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from judgelab.cache import JsonCache  # noqa: E402
from judgelab.config.evaluators import (  # noqa: E402
    FormatSettings,
    JudgeCallSettings,
    RubricSettings,
    RulerSettings,
)
from judgelab.evaluators.registry import build_evaluator  # noqa: E402
from judgelab.models.endpoint import Endpoint  # noqa: E402
from judgelab.probes.calls import calls_frame, record_calls  # noqa: E402
from judgelab.probes.run import probe_spec  # noqa: E402
from judgelab.scoring import GroupCall  # noqa: E402
from judgelab.verdicts import Candidate, Task  # noqa: E402
from support.openai_server import OpenAIServer, Reply  # noqa: E402

TASK = Task(task_id="t-1", source="autorl", prompt="write a function f that returns 1")
CALL = JudgeCallSettings(retries=1, backoff_s=0.0)


def candidates(k: int) -> list[Candidate]:
    return [
        Candidate(TASK.task_id, f"c{i}", i, f"<code>def f():\n    return {i}  # ANSWER-{i}</code>")
        for i in range(k)
    ]


@pytest.fixture()
def server() -> Iterator[OpenAIServer]:
    s = OpenAIServer()
    yield s
    s.close()


def endpoint(server: OpenAIServer) -> dict[str, Endpoint]:
    ep = Endpoint(name="calls-judge", base_url=server.base_url, model="m", fingerprint="fp-calls")
    return {"j": ep}


def test_probe_settings_fix_the_order_of_a_shuffling_judge_only() -> None:
    ruler = RulerSettings(name="r", judge="j", shuffle=True, call=CALL)
    rubric = RubricSettings(name="q", judge="j", rubric="grade it", call=CALL)
    assert ruler.in_given_order().shuffle is False and ruler.shuffle is True
    assert rubric.in_given_order() is rubric
    fixed = probe_spec(ruler, 0.7)
    assert (fixed.shuffle, fixed.call.temperature, fixed.call.retries) == (False, 0.7, 1)
    same = probe_spec(rubric, 0.7)
    assert same.model_dump() == {
        **rubric.model_dump(),
        "call": {**CALL.model_dump(), "temperature": 0.7},
    }


def graded_after_one_bad_reply(body: dict[str, Any]) -> Reply:
    """A rubric reply: candidate i's score is i / 4, but candidate 0's first attempt is not
    JSON (so it is retried)."""
    i = int(re.search(r"ANSWER-(\d)", body["messages"][-1]["content"]).group(1))
    if i == 0 and body["seed"] == 0:
        return {"content": "great code"}
    return {"content": json.dumps({"explanation": "ok", "score": i / 4})}


def test_pointwise_calls_are_recorded_per_candidate_with_their_retries(
    server: OpenAIServer,
) -> None:
    server.reply = graded_after_one_bad_reply
    spec = RubricSettings(name="q", judge="j", call=CALL)
    recording = record_calls(build_evaluator(spec, endpoint(server)), "g", "perm:identity", 0)
    verdicts = recording.score_group(TASK, candidates(3))
    assert [v.score for v in verdicts] == [0.0, 0.25, 0.5]
    table = calls_frame(recording.calls)
    rows = table.select("candidate_id", "attempt", "ok", "completion_tokens").rows()
    assert rows == [("c0", 0, True, 7), ("c0", 1, True, 7), ("c1", 0, True, 7), ("c2", 0, True, 7)]
    assert set(table["evaluator"]) == {"q"} and set(table["view"]) == {"perm:identity"}


def test_a_group_call_is_recorded_once_and_a_rule_records_none(server: OpenAIServer) -> None:
    def reply(body: dict[str, Any]) -> Reply:
        ids = re.findall(r'<trajectory id="(\d+)">', body["messages"][-1]["content"])
        scores = [{"trajectory_id": t, "explanation": "ok", "score": 0.5} for t in ids]
        return {"content": json.dumps({"scores": scores})}

    server.reply = reply
    spec = RulerSettings(name="r", judge="j", call=CALL)
    ruler = record_calls(build_evaluator(spec, endpoint(server)), "g", "perm:identity", 0)
    assert [v.score for v in ruler.score_group(TASK, candidates(3))] == [0.5] * 3
    assert [(c["candidate_id"], c["attempt"]) for c in ruler.calls] == [(None, 0)]

    rule = record_calls(build_evaluator(FormatSettings(name="format"), {}), "g", "perm:identity", 0)
    verdicts = rule.score_group(TASK, candidates(2))
    assert [v.status for v in verdicts] == ["scored", "scored"] and rule.calls == []


def test_a_group_call_counts_what_the_judge_cache_answered(server: OpenAIServer, tmp_path) -> None:
    """The scores stage's calls.json adds up each call's own counts (the calls may run in other
    processes): every attempt once, a retry included; a seed's answers apart."""
    server.reply = graded_after_one_bad_reply
    spec = RubricSettings(name="q", judge="j", call=CALL)

    def counts(cache: JsonCache) -> dict[str, int]:
        ev = build_evaluator(spec, endpoint(server), cache)
        result = GroupCall("run", ev, TASK, candidates(3))()
        assert [r["score"] for r in result.rows] == [0.0, 0.25, 0.5]
        return result.calls

    assert counts(JsonCache(tmp_path / "seed", "judge")) == {"hits": 0, "seeded": 0, "misses": 4}
    assert len(server.requests) == 4
    here = JsonCache(tmp_path / "here", "judge", seeds=[tmp_path / "seed"])
    assert counts(here) == {"hits": 4, "seeded": 4, "misses": 0}
    assert counts(here) == {"hits": 4, "seeded": 0, "misses": 0}
    assert len(server.requests) == 4
    rule = build_evaluator(FormatSettings(name="format"), {})
    assert GroupCall("run", rule, TASK, candidates(2))().calls == {
        "hits": 0, "seeded": 0, "misses": 0
    }  # fmt: skip


def test_a_pointwise_judge_asks_the_same_whatever_the_grouping(
    server: OpenAIServer, tmp_path
) -> None:
    """The rubric asks about one candidate a call: its calls on a task's candidates judged as
    one group (`scores.populations: together`) answer every call of the same candidates split
    into two groups (`apart`), which is why the reference re-run needs no rubric call. A group
    judge (RULER) asks anew: its prompt is the group."""

    def reply(body: dict[str, Any]) -> Reply:
        text = body["messages"][-1]["content"]
        ids = re.findall(r'<trajectory id="(\d+)">', text)
        if ids:
            return {"content": json.dumps(
                {"scores": [{"trajectory_id": t, "explanation": "ok", "score": 0.5} for t in ids]}
            )}  # fmt: skip
        i = int(re.search(r"ANSWER-(\d)", text).group(1))
        return {"content": json.dumps({"explanation": "ok", "score": i / 4})}

    server.reply = reply
    cache = JsonCache(tmp_path, "judge")
    cands = candidates(4)
    splits = ((cands[:2], "natural"), (cands[2:], "contrast"))
    for spec, new_calls_apart in (
        (RubricSettings(name="q", judge="j", call=CALL), 0),
        (RulerSettings(name="r", judge="j", call=CALL), 2),
    ):
        ev = build_evaluator(spec, endpoint(server), cache)
        together = GroupCall("run", ev, TASK, cands, population="all")()
        apart = [GroupCall("run", ev, TASK, part, population=p)() for part, p in splits]
        assert sum(a.calls["misses"] for a in apart) == new_calls_apart, spec.name
        if spec.name == "q":
            assert together.calls["misses"] == 4
            scores = [r["score"] for a in apart for r in a.rows]
            assert scores == [r["score"] for r in together.rows] == [0.0, 0.25, 0.5, 0.75]
