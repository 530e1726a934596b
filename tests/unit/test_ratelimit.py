"""Endpoint rate limits, tested against a real loopback server that enforces its own limit.

The server answers 429 (with Retry-After) to any request over its concurrency or its
requests-per-window budget and counts those refusals; judgelab configured with the same
limits must never be refused, and without them it is (so the tests can fail).
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dataclasses  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

from judgelab.config import EndpointModel, parse_settings  # noqa: E402
from judgelab.errors import RateLimitedError  # noqa: E402
from judgelab.models import client  # noqa: E402
from judgelab.models.endpoint import Endpoint  # noqa: E402
from judgelab.models.ratelimit import Limits, RateLimiter  # noqa: E402
from judgelab.models.server import remote_endpoint  # noqa: E402
from support.openai_server import OpenAIServer, Reply, http_error, ok  # noqa: E402

MSG = [{"role": "user", "content": "say hi"}]


def slow_ok(seconds: float) -> Any:
    def reply(body: dict[str, Any]) -> Reply:
        return {**ok("hi"), "delay_s": seconds}

    return reply


def ep(server: OpenAIServer, name: str, limits: Limits | None = None) -> Endpoint:
    # a unique name per test: limiters are shared per (name, base_url, model) in the process
    return Endpoint(name=name, base_url=server.base_url, model="m", fingerprint="fp",
                    timeout_s=10, limits=limits or Limits())  # fmt: skip


def call(e: Endpoint, retries: int = 0) -> str:
    return client.chat(e, MSG, temperature=0, max_tokens=4, seed=0, retries=retries).text


def test_concurrency_limit_keeps_a_strict_server_happy() -> None:
    with OpenAIServer(slow_ok(0.15), max_concurrency=2) as server:
        e = ep(server, "conc-limited", Limits(max_concurrency=2))
        with ThreadPoolExecutor(8) as pool:
            assert list(pool.map(lambda _: call(e), range(8))) == ["hi"] * 8
        assert (server.rejected, server.max_in_flight) == (0, 2)


def test_without_a_concurrency_limit_the_same_server_refuses() -> None:
    with OpenAIServer(slow_ok(1.0), max_concurrency=2) as server:
        e = ep(server, "conc-unlimited")
        with ThreadPoolExecutor(6) as pool:
            outcomes = list(pool.map(lambda _: _outcome(e), range(6)))
        assert server.rejected > 0 and "429" in outcomes


def _outcome(e: Endpoint) -> str:
    try:
        return call(e)
    except RateLimitedError as err:
        assert err.retry_after_s == 1.0
        return "429"


def test_requests_per_window_are_spread_out() -> None:
    window = 0.6
    with OpenAIServer(slow_ok(0), max_requests=3, window_s=window) as server:
        e = ep(server, "rpm-limited", Limits(requests_per_minute=3, window_s=window))
        started = time.monotonic()
        with ThreadPoolExecutor(7) as pool:
            assert list(pool.map(lambda _: call(e), range(7))) == ["hi"] * 7
        elapsed = time.monotonic() - started
        assert server.rejected == 0
        times = sorted(r["at"] for r in server.requests)
    assert elapsed >= 2 * window * 0.95  # 7 requests at 3 per window need 3 windows
    for i in range(len(times) - 3):
        assert times[i + 3] - times[i] >= window * 0.95


def test_retry_after_pauses_every_caller_of_the_endpoint() -> None:
    with OpenAIServer(slow_ok(0)) as server:
        server.add(http_error(429, "slow down", retry_after=0.5))
        e = ep(server, "pause", Limits(max_concurrency=1))
        with ThreadPoolExecutor(3) as pool:
            results = list(pool.map(lambda _: call(e, retries=1), range(3)))
        assert results == ["hi"] * 3
        times = [r["at"] for r in server.requests]
    assert len(times) == 4  # one 429, then three answers
    assert times[1] - times[0] >= 0.45, "a caller went on during the server's Retry-After"


def test_judge_calls_share_the_limiter_on_the_event_loop() -> None:
    from judgelab.evaluators.ruler import RulerJudge
    from tests.unit.test_judges import TASK, candidates, ruler_spec, score_by_candidate

    def slow_scores(body: dict[str, Any]) -> Reply:
        return {**score_by_candidate(lambda i: 0.5)(body), "delay_s": 0.1}

    with OpenAIServer(slow_scores, max_concurrency=1) as server:
        e = dataclasses.replace(
            ep(server, "judge-limited", Limits(max_concurrency=1)), structured_output="json_object"
        )
        judge = RulerJudge(ruler_spec(retries=0), e)
        with ThreadPoolExecutor(4) as pool:
            groups = list(pool.map(lambda _: judge.score_group(TASK, candidates(2)), range(4)))
        assert all(v.score == 0.5 for g in groups for v in g)
        assert (server.rejected, server.max_in_flight, len(server.requests)) == (0, 1, 4)


def test_token_budget_reserves_estimates_and_corrects_to_usage() -> None:
    now = [0.0]
    limiter = RateLimiter(Limits(tokens_per_minute=100), clock=lambda: now[0])
    with limiter.slot(60):  # 60 reserved, finished at t=0
        pass
    wait, entry = limiter._try_admit(50)  # 60 + 50 > 100: wait for the first to expire
    assert entry is None and wait == pytest.approx(60.0)
    with limiter.slot(30) as grant:  # 60 + 30 <= 100
        grant.used(10)  # the server said 10: 60 + 10 now
    with limiter.slot(30):  # 70 + 30 <= 100
        now[0] = 5.0  # this one finishes at t=5
    assert limiter._try_admit(1)[0] == pytest.approx(55.0)  # the first 60 frees at t=60
    now[0] = 61.0  # the first two expired; the last counts until t=65
    assert limiter._try_admit(71)[0] == pytest.approx(4.0)
    with limiter.slot(70):
        pass
    now[0] = 200.0
    wait, _ = limiter._try_admit(250)  # bigger than the budget, window empty: goes alone
    assert wait == 0.0


def test_limits_come_from_params_and_stay_out_of_the_run_id() -> None:
    limits = {"max_concurrency": 4, "requests_per_minute": 60, "tokens_per_minute": 90000}
    spec = {"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1", "model": "m", **limits}
    model = EndpointModel.model_validate(spec)
    e = remote_endpoint("remote", model)
    assert e.limits == Limits(4, 60, 90000)
    assert e.limiter is not None and e.limiter is remote_endpoint("remote", model).limiter
    with pytest.raises(Exception, match="max_concurrency"):
        EndpointModel.model_validate({**spec, "max_concurrency": 0})

    import polars as pl

    from judgelab.scoring import run_id_for

    def settings(**limits: Any) -> Any:
        base = {k: v for k, v in spec.items() if k not in Limits.__annotations__}
        return parse_settings({
            "models": {"remote": {**base, **limits}},
            "rollouts": {"policy": "remote"}, "tasks": {"autorl": {"model": "remote"}},
            "scores": {"evaluators": [{"name": "r", "kind": "ruler", "judge": "remote"},
                                   {"name": "execution", "kind": "execution"}]},
        })  # fmt: skip

    frame = pl.DataFrame({"candidate_id": ["a", "b"]})
    assert run_id_for(settings(), frame) == run_id_for(settings(max_concurrency=1), frame)
    # nor does a call's timeout: raising it for a slow server keeps the audit's run id
    assert run_id_for(settings(), frame) == run_id_for(settings(timeout_s=900), frame)
    assert run_id_for(settings(), frame) != run_id_for(settings(model="m2"), frame)
