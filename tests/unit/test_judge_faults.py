"""Judges against a real loopback server that fails on purpose.

Each fault (timeout, 429 with Retry-After, 500, malformed JSON, a truncated body, the wrong
number of scores, unknown trajectory ids, out-of-range scores, empty content) must give a
bounded number of attempts, then an unscored row whose reason says what went wrong; the run
goes on, and the analysis reports each judge's failure rate.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dataclasses  # noqa: E402
import re  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from judgelab.analysis.stats import evaluator_stats  # noqa: E402
from judgelab.evaluators.rubric import RubricJudge  # noqa: E402
from judgelab.evaluators.ruler import RulerJudge  # noqa: E402
from judgelab.report.audit import (  # noqa: E402
    DISTRIBUTION_COLUMNS,
    distribution_rows,
    findings,
)
from judgelab.scoring import score_group, scores_frame  # noqa: E402
from judgelab.verdicts import Task  # noqa: E402
from support.openai_server import (  # noqa: E402
    OpenAIServer,
    Reply,
    empty,
    hang,
    http_error,
    malformed_json,
    ok,
    truncated,
)
from tests.unit.test_judges import (  # noqa: E402
    TASK,
    Sleeps,
    candidates,
    endpoint,
    rubric_spec,
    ruler_spec,
    score_by_candidate,
    scores_json,
    shown_order,
)

TIMEOUT_S = 0.4  # the endpoint's client timeout in these tests


def _ruler_fault(kind: str) -> Reply | Any:
    """A reply function giving `kind` of bad RULER reply for whatever group is asked."""

    def reply(body: dict[str, Any]) -> Reply:
        ids = list(shown_order(body))
        if kind == "wrong count":
            return ok(scores_json([(t, 0.5) for t in ids[:-1]]))
        if kind == "unknown ids":
            return ok(scores_json([(t, 0.5) for t in ids[:-1]] + [("99", 0.5)]))
        if kind == "out of range":
            return ok(scores_json([(t, 7.0) for t in ids]))
        raise AssertionError(kind)

    return reply


# fault -> (reply, what the unscored reason must say, reason prefix)
TRANSPORT_FAULTS: dict[str, tuple[Reply, str, str]] = {
    "timeout": (hang(3 * TIMEOUT_S), f"timed out after {TIMEOUT_S:g} s", "judge call failed"),
    "429 with Retry-After": (
        http_error(429, "slow down", retry_after=3),
        "HTTP 429 rate limited",
        "judge call failed",
    ),
    "500": (http_error(500, "boom"), "HTTP 500", "judge call failed"),
    "malformed JSON": (malformed_json(), "malformed HTTP response", "judge call failed"),
    "truncated body": (truncated(), "connection failed", "judge call failed"),
    "empty content": (empty(), "empty reply", "judge reply error"),
}
REPLY_FAULTS = {
    "wrong count": "Expected 4",
    "unknown ids": "unknown trajectory_id '99'",
}


def _fast(server: OpenAIServer, mode: str = "json_schema") -> Any:
    return dataclasses.replace(endpoint(server, mode), timeout_s=TIMEOUT_S)  # type: ignore[arg-type]


@pytest.mark.parametrize("fault", sorted(TRANSPORT_FAULTS) + sorted(REPLY_FAULTS))
def test_each_ruler_fault_is_retried_a_bounded_number_of_times_then_unscored(fault: str) -> None:
    if fault in TRANSPORT_FAULTS:
        reply, expected, prefix = TRANSPORT_FAULTS[fault]
        respond: Any = lambda body: reply  # noqa: E731
    else:
        respond, expected, prefix = _ruler_fault(fault), REPLY_FAULTS[fault], "judge reply error"
    sleeps = Sleeps()
    with OpenAIServer(respond) as server:
        judge = RulerJudge(ruler_spec(retries=2, backoff_s=0.5), _fast(server), sleep=sleeps)
        verdicts = judge.score_group(TASK, candidates(4))
        assert len(server.requests) == 3  # 1 + retries, never more
    assert len(verdicts) == 4
    for v in verdicts:
        assert v.status == "unscored" and v.score is None
        assert v.reason is not None and v.reason.startswith(f"{prefix} after 3 attempts")
        assert expected in v.reason
    if fault == "429 with Retry-After":
        assert sleeps.calls == [3.0, 3.0]  # the server's Retry-After beats 0.5 s, 1 s backoff
    else:
        assert sleeps.calls == [0.5, 1.0]


def test_out_of_range_scores_are_data_not_failures() -> None:
    with OpenAIServer(_ruler_fault("out of range")) as server:
        verdicts = RulerJudge(ruler_spec(retries=2), _fast(server), sleep=Sleeps()).score_group(
            TASK, candidates(3)
        )
        assert len(server.requests) == 1  # not retried: the judge answered
    assert all(v.status == "unscored" and v.reason == "out of range: raw score 7" for v in verdicts)
    assert all(v.raw_score == 7.0 and v.out_of_range for v in verdicts)


@pytest.mark.parametrize("fault", sorted(TRANSPORT_FAULTS))
def test_each_rubric_fault_is_retried_a_bounded_number_of_times_then_unscored(fault: str) -> None:
    reply, expected, prefix = TRANSPORT_FAULTS[fault]
    with OpenAIServer(lambda body: reply) as server:
        judge = RubricJudge(rubric_spec(retries=1), _fast(server, "json_object"), sleep=Sleeps())
        v = judge.score_group(TASK, candidates(1))[0]
        assert len(server.requests) == 2
    assert v.status == "unscored" and v.score is None
    assert v.reason is not None and v.reason.startswith(prefix) and expected in v.reason


def test_a_flaky_judge_completes_the_run_and_its_failure_rate_is_reported() -> None:
    """Two judges over six groups: one healthy, one whose endpoint fails every other group
    for good (all its attempts). Every row is there, and analysis shows who failed how often."""
    tasks = [Task(task_id=f"t-{n}", source="autorl", prompt="write f") for n in range(6)]
    good = score_by_candidate(lambda i: (i + 1) / 5)

    def flaky(body: dict[str, Any]) -> Reply:
        user = next(m for m in body["messages"] if m["role"] == "user")["content"]
        failing = int(re.search(r"# GROUP-t-(\d+)", user).group(1)) % 2 == 1  # type: ignore[union-attr]
        return http_error(503, "overloaded") if failing else good(body)

    rows: list[dict[str, Any]] = []
    with OpenAIServer(good) as healthy, OpenAIServer(flaky) as broken:
        for name, server in (("ruler-healthy", healthy), ("ruler-flaky", broken)):
            spec = ruler_spec(retries=1).model_copy(update={"name": name, "judge": name})
            judge = RulerJudge(spec, _fast(server), sleep=Sleeps())
            for task in tasks:
                cands = [  # the marker tells the flaky server which group it is judging
                    dataclasses.replace(c, completion=f"{c.completion}  # GROUP-{task.task_id}")
                    for c in candidates(3, task)
                ]
                rows += score_group("run-1", judge, task, cands, 0)
        assert len(broken.requests) == 3 + 3 * 2  # 3 good groups, 3 failing ones x 2 attempts
    frame = scores_frame(rows)
    assert frame.height == 2 * 6 * 3  # nothing dropped
    stats = evaluator_stats(frame)
    assert stats["ruler-healthy"]["judge_failure_rate"] == 0.0
    assert stats["ruler-flaky"]["judge_failure_rate"] == 0.5
    assert stats["ruler-flaky"]["n_judge_failures"] == 9
    assert stats["ruler-flaky"]["n_scored"] == 9
    table = {row[0]: row for row in distribution_rows(stats)}
    col = DISTRIBUTION_COLUMNS.index("judge failures")
    assert (table["ruler-flaky"][col], table["ruler-healthy"][col]) == ("50.0%", "0.0%")
    text = " ".join(findings("ruler-flaky", stats["ruler-flaky"]))
    assert "the judge itself failed" in text and "9 rows" in text
    assert not any("itself failed" in f for f in findings("ruler-healthy", stats["ruler-healthy"]))
