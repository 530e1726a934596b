"""Progress for long loops (rollouts, scoring, training): count, rate, elapsed and ETA on stderr.

    with progress("rollouts", total=len(tasks), unit="group") as advance:
        for t in tasks:
            ...
            advance()                      # one more done
            advance(0, description="...")  # only relabel
            advance(0, total=12)           # the amount of work became known

On a terminal this is a rich bar redrawn in place. Elsewhere (CI logs, `dvc repro` piped to
a file) it is one plain line per step or relabel — `[judgelab] scores: 3/8 group, 45 s/group,
elapsed 2:15, ETA 3:45` — so a long stage is never silent. `JUDGELAB_PROGRESS=0` turns both
off. Library code keeps using `logging`; only flows and the CLI open progress.

The rate and the ETA leave out the opening run of steps that came at once (`Pace`): a resumed
stage first replays its cached units in a few seconds, after its start-up (a Prefect server, a
model load), and counting them would put hours of judge calls at minutes. A stage of quick
steps only keeps the plain average.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text


class Advance(Protocol):
    def __call__(
        self, n: int = 1, *, description: str | None = None, total: int | None = None
    ) -> None: ...


def format_rate(speed: float | None, unit: str) -> str:
    """`3.2 group/s` when fast, `45 s/group` when slow (judge calls), `-` before any data."""
    if not speed:
        return f"- {unit}/s"
    if speed >= 1:
        return f"{speed:.1f} {unit}/s"
    return f"{1 / speed:.0f} s/{unit}"


# A step that comes within this many seconds of the one before, while every step so far
# has, is part of the opening run of instant steps (cache hits) that the rate leaves out.
INSTANT_S = 1.0


class Pace:
    """Steps per second and the time left, leaving out an opening run of instant steps.

    Until a step takes longer than `INSTANT_S` after the one before, each step moves the
    rate's origin (its count and its clock) to itself; from the first slow step on, the origin
    stays and the rate is the average since it. The first step has no step before it: the
    time it took includes the stage's start-up, so it never ends the opening run (a resumed
    stage's first cache hit comes seconds after the start). While no step has been slow (a
    stage of quick local units, a resumed one still replaying its cache, a fresh one after
    its first step) the rate is the plain average since the start."""

    def __init__(self, now: float) -> None:
        self.start = self.last = self.origin_time = now
        self.done = self.origin_done = 0
        self.opening = True  # every step so far came at once

    def step(self, n: int, now: float) -> None:
        if n <= 0:
            return
        first = self.done == 0
        self.done += n
        if self.opening and (first or now - self.last <= INSTANT_S):
            self.origin_done, self.origin_time = self.done, now
        else:
            self.opening = False
        self.last = now

    @property
    def instant(self) -> int:
        """The opening run the rate leaves out; 0 where it is the first step alone (a fresh
        run, whose rate starts at its first step, after the start-up)."""
        return 0 if self.opening or self.origin_done < 2 else self.origin_done

    def speed(self, now: float) -> float | None:
        done, since = (0, self.start) if self.opening else (self.origin_done, self.origin_time)
        counted, spent = self.done - done, now - since
        return counted / spent if counted > 0 and spent > 0 else None

    def eta(self, total: int | None, now: float) -> float | None:
        speed = self.speed(now)
        return (total - self.done) / speed if speed and total is not None else None


class RateColumn(ProgressColumn):
    """Items per second (or seconds per item), from the task's `Pace`."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        pace: Pace = task.fields["pace"]
        return Text(
            format_rate(pace.speed(time.monotonic()), self.unit), style="progress.data.speed"
        )


class EtaColumn(ProgressColumn):
    """The time left at the task's `Pace`."""

    def render(self, task: Task) -> Text:
        pace: Pace = task.fields["pace"]
        eta = pace.eta(None if task.total is None else int(task.total), time.monotonic())
        return Text(format_clock(eta), style="progress.remaining")


def enabled() -> bool:
    return os.environ.get("JUDGELAB_PROGRESS", "1").lower() not in ("0", "false", "no", "off")


def format_clock(seconds: float | None) -> str:
    """`1:05:09`, `4:07`, `0:03`; `-` when unknown."""
    if seconds is None:
        return "-"
    total = int(round(seconds))
    h, rest = divmod(total, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class _Lines:
    """The non-terminal form: one line per step, with elapsed time and the ETA at its `Pace`."""

    def __init__(self, description: str, total: int | None, unit: str, console: Console) -> None:
        self.description, self.total, self.unit, self.console = description, total, unit, console
        self.pace = Pace(time.monotonic())

    def __call__(
        self, n: int = 1, *, description: str | None = None, total: int | None = None
    ) -> None:
        changed = description is not None and description != self.description
        if description is not None:
            self.description = description
        if total is not None:
            self.total = total
        if n or changed:
            now = time.monotonic()
            self.pace.step(n, now)
            self.console.print(
                self.line(now),
                highlight=False,
                markup=False,
                soft_wrap=True,  # one line in a log, whatever the console's width
            )

    def line(self, now: float) -> str:
        pace = self.pace
        count = f"{pace.done}/{self.total}" if self.total is not None else f"{pace.done}"
        instant = f" ({pace.instant} at once, not in the rate)" if pace.instant else ""
        return (
            f"[judgelab] {self.description}: {count} {self.unit}, "
            f"{format_rate(pace.speed(now), self.unit)}, elapsed {format_clock(now - pace.start)}, "
            f"ETA {format_clock(pace.eta(self.total, now))}{instant}"
        )


@contextmanager
def progress(
    description: str,
    total: int | None,
    *,
    unit: str = "item",
    console: Console | None = None,
) -> Iterator[Advance]:
    """Progress for `total` items; yields `advance(n=1, description=None, total=None)`."""
    if not enabled():

        def silent(n: int = 1, *, description: str | None = None, total: int | None = None) -> None:
            return None

        yield silent
        return
    console = console or Console(stderr=True)
    if not console.is_terminal:
        yield _Lines(description, total, unit, console)
        return
    bar = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        RateColumn(unit),
        TextColumn("elapsed"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        EtaColumn(),
        console=console,
    )
    with bar:
        pace = Pace(time.monotonic())
        task_id = bar.add_task(description, total=total, pace=pace)

        def advance(
            n: int = 1, *, description: str | None = None, total: int | None = None
        ) -> None:
            pace.step(n, time.monotonic())
            bar.update(task_id, advance=n, description=description, total=total)

        yield advance
