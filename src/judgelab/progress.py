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
    TimeRemainingColumn,
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


class RateColumn(ProgressColumn):
    """Items per second (or seconds per item), from rich's own moving speed estimate."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        return Text(format_rate(task.speed, self.unit), style="progress.data.speed")


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
    """The non-terminal form: one line per step, with elapsed time and a linear ETA."""

    def __init__(self, description: str, total: int | None, unit: str, console: Console) -> None:
        self.description, self.total, self.unit, self.console = description, total, unit, console
        self.done = 0
        self.start = time.monotonic()

    def __call__(
        self, n: int = 1, *, description: str | None = None, total: int | None = None
    ) -> None:
        changed = description is not None and description != self.description
        if description is not None:
            self.description = description
        if total is not None:
            self.total = total
        self.done += n
        if n or changed:
            self.console.print(
                self.line(time.monotonic() - self.start),
                highlight=False,
                markup=False,
                soft_wrap=True,  # one line in a log, whatever the console's width
            )

    def line(self, elapsed: float) -> str:
        speed = self.done / elapsed if self.done and elapsed > 0 else None
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        eta = (self.total - self.done) / speed if speed and self.total is not None else None
        return (
            f"[judgelab] {self.description}: {count} {self.unit}, {format_rate(speed, self.unit)}, "
            f"elapsed {format_clock(elapsed)}, ETA {format_clock(eta)}"
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
        TimeRemainingColumn(),
        console=console,
        # judge calls take tens of seconds: average the speed over the whole run
        speed_estimate_period=3600,
    )
    with bar:
        task_id = bar.add_task(description, total=total)

        def advance(
            n: int = 1, *, description: str | None = None, total: int | None = None
        ) -> None:
            bar.update(task_id, advance=n, description=description, total=total)

        yield advance
