"""Fan-out: a stage's units of work run concurrently under per-lane limits; results in order.

A *unit* is one call of a Prefect task (a score group, a rollout group, a probe view). Units
in one *lane* share a limit on how many run at once; lanes run side by side:

- one lane per endpoint model: its `max_concurrency` (`DEFAULT_ENDPOINT_CONCURRENCY` when it
  sets none), so different judges on different endpoints are in flight together;
- one lane for the embedded server, limit 1: one model process on the machine, and the units'
  evaluator-major order keeps its model swaps as rare as in a serial run;
- one lane for local work (rules, the sandbox): one unit per core, or the embedded lane
  while the embedded server runs.

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

from prefect.cache_policies import NONE
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from judgelab.config import EmbeddedModel, RunnerSettings, Settings
from judgelab.models.endpoint import DEFAULT_ENDPOINT_CONCURRENCY
from judgelab.progress import progress

log = logging.getLogger("judgelab.flows.fanout")

# The options of a unit's Prefect task. Prefect's own result caching stays off: judgelab's
# caches are content-addressed already, and hashing each unit's inputs (an evaluator, a group)
# cost about a quarter of the CPU of a loopback judge call (docs/BENCHMARKS.md, scaling).
UNIT_TASK: dict[str, Any] = {"retries": 2, "retry_delay_seconds": 5, "cache_policy": NONE}

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
        self.limits = {EMBEDDED_LANE: 1, LOCAL_LANE: max(1, len(os.sched_getaffinity(0)))}
        for name, spec in settings.models.items():
            if not isinstance(spec, EmbeddedModel):
                limits = spec.max_concurrency or DEFAULT_ENDPOINT_CONCURRENCY
                self.limits[f"model:{name}"] = limits

    def of(self, model: str | None) -> str:
        """The lane of a unit that calls `model` (None: no model, local work)."""
        if model is None:
            return EMBEDDED_LANE if self.embedded else LOCAL_LANE
        if isinstance(self.settings.model(model), EmbeddedModel):
            return EMBEDDED_LANE
        return f"model:{model}"


def task_runner(runner: RunnerSettings) -> TaskRunner:
    """The Prefect task runner params.yaml's `runner:` names."""
    if runner.kind == "threads":
        return ThreadPoolTaskRunner(max_workers=runner.workers)
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
    """`fan_out` without its progress: `on_done(unit)` after each unit that succeeded.

    A unit that fails (after its task's retries): by default no unit starts after it, the
    units in flight finish and its error is raised. With `return_exceptions` the error (an
    `Exception`) is that unit's result and every other unit still runs."""
    results: list[Any] = [None] * len(units)
    queues: dict[str, deque[int]] = {}
    for i, u in enumerate(units):
        queues.setdefault(u.lane, deque()).append(i)
    running: dict[PrefectFuture[Any], int] = {}
    busy: Counter[str] = Counter()
    first: dict[str, float] = {}  # lane -> when its first unit was submitted
    last: dict[str, float] = {}  # lane -> when its last result came back
    error: BaseException | None = None

    def fill() -> None:
        for lane, queue in queues.items():
            while queue and busy[lane] < max(1, limits.get(lane, 1)) and error is None:
                i = queue.popleft()
                first.setdefault(lane, time.monotonic())
                running[task.submit(**units[i].kwargs)] = i
                busy[lane] += 1

    fill()
    while running:
        future = next(as_completed(list(running)))
        i = running.pop(future)
        busy[units[i].lane] -= 1
        last[units[i].lane] = time.monotonic()
        try:
            results[i] = future.result()
        except Exception as err:
            if not return_exceptions:
                error = error or err
                continue
            results[i] = err
        except BaseException as err:  # noqa: BLE001 (re-raised once the others finish)
            error = error or err
            continue
        else:
            on_done(units[i])
        fill()
    if error is not None:
        raise error
    for lane, queue_start in first.items():
        n = sum(u.lane == lane for u in units)
        log.info("lane %s: %d units in %.2f s", lane, n, last[lane] - queue_start)
    return results
