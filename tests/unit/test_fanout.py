"""judgelab.flows.fanout: per-lane limits, results in unit order, a failure after the others finish.

Real Prefect tasks on Prefect's thread pool (a temporary API server for the module); the task
body is ours: it records how many units of its lane run at once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from prefect import flow, task
from prefect.context import TaskRunContext
from prefect.task_runners import ThreadPoolTaskRunner

from judgelab.config import DEFAULT_ENDPOINT_CONCURRENCY, parse_settings
from judgelab.flows.fanout import (
    EMBEDDED_LANE,
    LOCAL_BATCH,
    LOCAL_LANE,
    Lanes,
    Unit,
    fan_out,
    run_units,
)

_lock = threading.Lock()
_now: Counter[str] = Counter()
_peak: Counter[str] = Counter()
_finished: list[int] = []
_runs: dict[int, set[str]] = {}  # unit -> the ids of the task runs it ran in


@task(retries=0)
def unit_task(lane: str, i: int, delay: float, fail: bool = False) -> int:
    run = TaskRunContext.get()
    with _lock:
        _runs.setdefault(i, set()).add(str(run.task_run.id) if run else "none")
        _now[lane] += 1
        _peak[lane] = max(_peak[lane], _now[lane])
    try:
        time.sleep(delay)
        if fail:
            raise RuntimeError(f"unit {i} failed")
        return i * 10
    finally:
        with _lock:
            _now[lane] -= 1
            _finished.append(i)


@flow(task_runner=ThreadPoolTaskRunner(max_workers=16))
def fan_flow(units: list[Unit], limits: dict[str, int]) -> list[int]:
    return fan_out(unit_task, units, limits, stage="test")


@flow(task_runner=ThreadPoolTaskRunner(max_workers=16))
def returning_flow(units: list[Unit], limits: dict[str, int]) -> list[int | str]:
    results = run_units(unit_task, units, limits, return_exceptions=True)
    return [f"error: {r}" if isinstance(r, Exception) else r for r in results]


@pytest.fixture(scope="module", autouse=True)
def prefect_api() -> Iterator[None]:
    from judgelab_cli.deploy import temporary_prefect_server

    with temporary_prefect_server():
        yield


@pytest.fixture(autouse=True)
def clean() -> None:
    _now.clear()
    _peak.clear()
    _finished.clear()
    _runs.clear()


def units(lane: str, n: int, start: int = 0, delay: float = 0.2) -> list[Unit]:
    return [Unit(lane, {"lane": lane, "i": i, "delay": delay}) for i in range(start, start + n)]


def test_lanes_run_side_by_side_each_within_its_limit_and_results_keep_unit_order() -> None:
    # slow units first in one lane, fast ones in the other: completion order != unit order
    work = units("a", 6, delay=0.3) + units("b", 6, start=6, delay=0.05)
    assert fan_flow(work, {"a": 3, "b": 1}) == [i * 10 for i in range(12)]
    assert _peak == {"a": 3, "b": 1}


def test_a_lane_without_a_limit_runs_one_at_a_time() -> None:
    assert fan_flow(units("x", 3, delay=0.1), {}) == [0, 10, 20]
    assert _peak["x"] == 1


def test_a_failed_unit_raises_after_the_units_in_flight_finish() -> None:
    work = units("a", 3, delay=0.4)
    work[0] = Unit("a", {"lane": "a", "i": 0, "delay": 0.0, "fail": True})
    with pytest.raises(RuntimeError, match="unit 0 failed"):
        fan_flow(work, {"a": 3})
    assert sorted(_finished) == [0, 1, 2]  # the two slow ones were not abandoned


def test_no_new_unit_starts_after_a_failure() -> None:
    work = units("a", 5, delay=0.2)
    work[0] = Unit("a", {"lane": "a", "i": 0, "delay": 0.0, "fail": True})
    with pytest.raises(RuntimeError):
        fan_flow(work, {"a": 2})
    assert sorted(_finished) == [0, 1]


def test_with_return_exceptions_a_failed_unit_gives_its_error_and_the_rest_still_run() -> None:
    # one at a time: units 2 and 3 start only after unit 1 failed
    work = units("a", 4, delay=0.05)
    work[1] = Unit("a", {"lane": "a", "i": 1, "delay": 0.0, "fail": True})
    assert returning_flow(work, {"a": 1}) == [0, "error: unit 1 failed", 20, 30]
    assert _finished == [0, 1, 2, 3]
    assert _peak["a"] == 1


def local_units(n: int, delay: float = 0.0) -> list[Unit]:
    return units(LOCAL_LANE, n, delay=delay)


def test_many_local_units_share_task_runs_and_keep_their_order_and_limit() -> None:
    # 2 slots, 24 local units: batches of 24 // (4 * 2) = 3, so 8 task runs, 2 at a time
    work = local_units(24, delay=0.02) + units("m", 4, start=24, delay=0.05)
    assert fan_flow(work, {LOCAL_LANE: 2, "m": 4}) == [i * 10 for i in range(28)]
    batches = {run for i in range(24) for run in _runs[i]}
    assert len(batches) == 8
    assert all(len(_runs[i]) == 1 for i in range(28))
    assert _peak[LOCAL_LANE] == 2
    # no other lane's units share a task run, with each other or with local work
    assert len({run for i in range(24, 28) for run in _runs[i]} | batches) == 12


def test_batches_never_exceed_local_batch_and_a_few_local_units_run_alone() -> None:
    fan_flow(local_units(200), {LOCAL_LANE: 1})
    runs = [run for i in range(200) for run in _runs[i]]
    assert max(runs.count(r) for r in set(runs)) == LOCAL_BATCH
    _runs.clear()
    fan_flow(local_units(7), {LOCAL_LANE: 2})  # 7 // 8 = 0: no batches in a small run
    assert len({run for i in range(7) for run in _runs[i]}) == 7


def test_a_local_unit_that_fails_in_its_batch_runs_again_alone_then_raises() -> None:
    work = local_units(16)
    work[5] = Unit(LOCAL_LANE, {"lane": LOCAL_LANE, "i": 5, "delay": 0.0, "fail": True})
    with pytest.raises(RuntimeError, match="unit 5 failed"):
        fan_flow(work, {LOCAL_LANE: 1})
    assert len(_runs[5]) == 2  # once in its batch of 4, once alone
    assert _finished.count(5) == 2


def test_with_return_exceptions_a_failed_local_unit_costs_its_batch_nothing() -> None:
    work = local_units(16)
    work[5] = Unit(LOCAL_LANE, {"lane": LOCAL_LANE, "i": 5, "delay": 0.0, "fail": True})
    results = returning_flow(work, {LOCAL_LANE: 1})
    assert results == [i * 10 if i != 5 else "error: unit 5 failed" for i in range(16)]
    assert all(_finished.count(i) == 1 for i in range(16) if i != 5)


def test_lanes_from_the_model_registry() -> None:
    settings = parse_settings(
        {
            "models": {
                "local": {"kind": "embedded", "zoo": "smollm2-135m-instruct", "family": "s"},
                "hosted": {"kind": "endpoint", "base_url": "http://h/v1", "model": "m"},
                "capped": {
                    "kind": "endpoint",
                    "base_url": "http://h/v1",
                    "model": "m",
                    "max_concurrency": 9,
                },
            },
            "rollouts": {"policy": "local"},
            "tasks": {"autorl": {"enabled": False, "model": "local"}},
            "scores": {"evaluators": [{"name": "format", "kind": "format"}]},
        }
    )
    lanes = Lanes(settings, ["hosted"])
    assert lanes.of("local") == EMBEDDED_LANE
    assert lanes.of("hosted") == "model:hosted"
    assert lanes.of(None) == LOCAL_LANE
    # local work waits beside a running embedded server
    assert Lanes(settings, ["hosted", "local"]).of(None) == EMBEDDED_LANE
    limits = lanes.limits
    assert limits[EMBEDDED_LANE] == 1
    assert limits["model:hosted"] == DEFAULT_ENDPOINT_CONCURRENCY
    assert limits["model:capped"] == 9
    assert limits[LOCAL_LANE] >= 1
