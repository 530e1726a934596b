"""Fan-out: a stage's units of work run concurrently under per-lane limits; results in order.

A *unit* is one call of a Prefect task (a score group, a rollout group, a probe view). Units
in one *lane* share a limit on how many run at once; lanes run side by side:

- one lane per endpoint model: its `max_concurrency` (`DEFAULT_ENDPOINT_CONCURRENCY` when it
  sets none; `judgelab.config`), so different judges on different endpoints are in flight
  together;
- one lane for the embedded server, limit `EMBEDDED_CONCURRENCY`: one model process on the
  machine, and the units' evaluator-major order keeps its model swaps as rare as in a serial
  run;
- one lane for local work (rules, the sandbox): one unit per core, or the embedded lane
  while the embedded server runs.

Units of the local lane go to the runner in batches once there are many of them: a task
run costs the engine a few ms of CPU and a handful of events, about what a quick rule or
sandbox verdict costs itself, and on a 2-core host that CPU is taken from the judge calls in
flight beside them (docs/BENCHMARKS.md, scaling). A batch is one task run that calls its units
in turn; a unit that raises there runs again alone, as its own task run with the task's
retries, so failures behave as without batches.

Units go to the flow's task runner (Prefect's thread pool, or Dask: `task_runner`), and each
result is stored at its unit's index, so the output is the same whatever the concurrency.
Retries are the task's own (Prefect). When a unit still fails, the units in flight finish (their
calls land in the caches, so a rerun resumes) and the first error is raised; a caller that
can use the others' results (training: one judge's failure costs no other judge its epoch)
asks for each failed unit's error in its place instead (`return_exceptions`).

`fan_out` shows its own progress; `run_units` is the same scheduling for a caller that keeps a
progress display of its own (the training stage, whose bar counts epochs).
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prefect import task
from prefect.cache_policies import NONE
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from judgelab.config import EMBEDDED_CONCURRENCY, EmbeddedModel, RunnerSettings, Settings
from judgelab.extras import require
from judgelab.models.server import model_limits
from judgelab.progress import progress

log = logging.getLogger("judgelab.flows.fanout")

# The options of a unit's Prefect task. Prefect's own result caching stays off: judgelab's
# caches are content-addressed already, and hashing each unit's inputs (an evaluator, a group)
# cost about a quarter of the CPU of a loopback judge call (docs/BENCHMARKS.md, scaling).
UNIT_TASK: dict[str, Any] = {"retries": 2, "retry_delay_seconds": 5, "cache_policy": NONE}

# The most local units in one batch. A lane of n local units with limit L gets batches of
# n // (4 L) (at least 1, at most this): four batches per slot keep the slots evenly busy,
# and a small run (the default `make run`) has no batches at all.
LOCAL_BATCH = 8

EMBEDDED_LANE = "embedded"
LOCAL_LANE = "local"


@dataclass(frozen=True)
class Unit:
    lane: str
    kwargs: dict[str, Any] = field(hash=False)
    label: str = ""


class Lanes:
    """The lanes of a stage that calls `models` (registry names)."""

    def __init__(self, settings: Settings, models: Iterable[str]) -> None:
        self.settings = settings
        # Local work shares the embedded server's lane while one runs: sandboxed programs
        # beside llama.cpp's threads on a 2-core host slow both.
        self.embedded = any(isinstance(settings.model(m), EmbeddedModel) for m in models)
        self.limits = {
            EMBEDDED_LANE: EMBEDDED_CONCURRENCY,
            LOCAL_LANE: max(1, len(os.sched_getaffinity(0))),
        }
        for name, spec in settings.models.items():
            if not isinstance(spec, EmbeddedModel):
                self.limits[f"model:{name}"] = model_limits(spec).concurrency

    def of(self, model: str | None) -> str:
        """The lane of a unit that calls `model` (None: no model, local work)."""
        if model is None:
            return EMBEDDED_LANE if self.embedded else LOCAL_LANE
        if isinstance(self.settings.model(model), EmbeddedModel):
            return EMBEDDED_LANE
        return f"model:{model}"


class _Failed:
    """A unit's error inside a batch, returned in its place (the batch itself succeeds)."""

    def __init__(self, error: Exception) -> None:
        self.error = error


@task(name="local-batch", retries=0, cache_policy=NONE)
def _local_batch(unit_task: Any, calls: list[dict[str, Any]]) -> list[Any]:
    results: list[Any] = []
    for kwargs in calls:
        try:
            results.append(unit_task.fn(**kwargs))
        except Exception as err:  # noqa: BLE001 (the unit runs again alone, with retries)
            results.append(_Failed(err))
    return results


def _work_items(units: Sequence[Unit], limits: Mapping[str, int]) -> dict[str, deque[list[int]]]:
    """Each lane's queue of work items, in unit order: one unit's index, or (the local lane)
    a batch of units' indices. Local work beside an embedded server shares that server's lane
    and is not batched: there a model call, not a task run, is what takes the time."""
    by_lane: dict[str, list[int]] = {}
    for i, u in enumerate(units):
        by_lane.setdefault(u.lane, []).append(i)
    queues: dict[str, deque[list[int]]] = {}
    for lane, indices in by_lane.items():
        size = 1
        if lane == LOCAL_LANE:
            size = min(LOCAL_BATCH, max(1, len(indices) // (4 * max(1, limits.get(lane, 1)))))
        items = deque(indices[j : j + size] for j in range(0, len(indices), size))
        queues[lane] = items
    return queues


def task_runner(runner: RunnerSettings) -> TaskRunner:
    """The Prefect task runner params.yaml's `runner:` names."""
    if runner.kind == "threads":
        return ThreadPoolTaskRunner(max_workers=runner.workers)
    require("dask", "runner.kind: dask")
    from prefect_dask import DaskTaskRunner  # an extra: only users of Dask install it

    if runner.address:
        return DaskTaskRunner(address=runner.address)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": runner.workers,
            "threads_per_worker": runner.threads_per_worker,
            "processes": True,
            "dashboard_address": None,
        }
    )


def fan_out(
    task: Any,
    units: Sequence[Unit],
    limits: Mapping[str, int],
    *,
    stage: str,
    unit: str = "unit",
) -> list[Any]:
    """`task.submit(**unit.kwargs)` for every unit, at most `limits[lane]` at once per lane
    (1 for a lane it does not name); the results in the units' order. Progress shows as
    `stage` counting `unit`s; each lane's wall time and the total are logged."""
    start = time.monotonic()
    with progress(stage, len(units), unit=unit) as advance:
        results = run_units(
            task, units, limits, lambda u: advance(description=f"{stage}: {u.label}")
        )
    log.info("%s: %d %ss in %.2f s", stage, len(units), unit, time.monotonic() - start)
    return results


def run_units(
    task: Any,
    units: Sequence[Unit],
    limits: Mapping[str, int],
    on_done: Callable[[Unit], None] = lambda u: None,
    *,
    return_exceptions: bool = False,
) -> list[Any]:
    """`fan_out` without its progress: `on_done(unit)` after each unit that succeeded. A unit
    that fails (after its task's retries): by default no unit starts after it, the units in
    flight finish and its error is raised; with `return_exceptions` the error (an `Exception`)
    is that unit's result and every other unit still runs."""
    results: list[Any] = [None] * len(units)
    queues = _work_items(units, limits)
    batch_task = _local_batch.with_options(name=f"{getattr(task, 'name', 'unit')}-batch")
    running: dict[PrefectFuture[Any], list[int]] = {}
    busy: Counter[str] = Counter()
    first: dict[str, float] = {}  # lane -> when its first unit was submitted
    last: dict[str, float] = {}  # lane -> when its last result came back
    error: BaseException | None = None

    def fill() -> None:
        for lane, queue in queues.items():
            while queue and busy[lane] < max(1, limits.get(lane, 1)) and error is None:
                item = queue.popleft()
                first.setdefault(lane, time.monotonic())
                if len(item) == 1:
                    future = task.submit(**units[item[0]].kwargs)
                else:
                    future = batch_task.submit(task, [units[i].kwargs for i in item])
                running[future] = item
                busy[lane] += 1

    fill()
    while running:
        future = next(as_completed(list(running)))
        item = running.pop(future)
        lane = units[item[0]].lane
        busy[lane] -= 1
        last[lane] = time.monotonic()
        try:
            value = future.result()
        except Exception as err:
            if len(item) > 1:  # the batch itself failed, not one of its units
                value = [_Failed(err)] * len(item)
            elif not return_exceptions:
                error = error or err
                continue
            else:
                value = err
        except BaseException as err:  # noqa: BLE001 (re-raised once the others finish)
            error = error or err
            continue
        failed = _store(item, value, units, results, on_done)
        queues[lane].extendleft(reversed(failed))  # again alone, with the task's retries
        fill()
    if error is not None:
        raise error
    _log_lane_times(units, first, last)
    return results


def _log_lane_times(
    units: Sequence[Unit], first: Mapping[str, float], last: Mapping[str, float]
) -> None:
    """Each lane's wall time, from its first unit submitted to its last result."""
    for lane, queue_start in first.items():
        n = sum(u.lane == lane for u in units)
        log.info("lane %s: %d units in %.2f s", lane, n, last[lane] - queue_start)


def _store(
    item: list[int],
    value: Any,
    units: Sequence[Unit],
    results: list[Any],
    on_done: Callable[[Unit], None],
) -> list[list[int]]:
    """Puts a finished work item's value (a batch's: one per unit) into `results`; returns
    the batch's units that failed, each as a work item of its own."""
    if len(item) == 1:
        results[item[0]] = value
        if not isinstance(value, Exception):
            on_done(units[item[0]])
        return []
    failed = []
    for i, outcome in zip(item, value, strict=True):
        if isinstance(outcome, _Failed):
            failed.append([i])
        else:
            results[i] = outcome
            on_done(units[i])
    return failed
