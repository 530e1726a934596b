"""Progress bars for long loops (rollouts, scoring, training): rate and ETA on stderr.

    with progress("rollouts", total=len(tasks), unit="group") as advance:
        for t in tasks:
            ...
            advance()                      # one more done
            advance(0, description="...")  # only relabel the bar

The bar is a rich `Progress` on stderr. On a terminal it redraws in place; elsewhere (CI
logs, `dvc repro` output piped to a file) rich prints it once, finished, when the block
ends, so logs are not flooded. `JUDGELAB_PROGRESS=0` turns bars off entirely. Library code
keeps using `logging`; only flows and the CLI open bars.
"""

from __future__ import annotations

import os
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
    def __call__(self, n: int = 1, *, description: str | None = None) -> None: ...


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


@contextmanager
def progress(
    description: str,
    total: int | None,
    *,
    unit: str = "item",
    console: Console | None = None,
) -> Iterator[Advance]:
    """A progress bar for `total` items; yields `advance(n=1, description=None)`."""
    if not enabled():

        def silent(n: int = 1, *, description: str | None = None) -> None:
            return None

        yield silent
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
        console=console or Console(stderr=True),
        # judge calls take tens of seconds: average the speed over the whole run
        speed_estimate_period=3600,
    )
    with bar:
        task_id = bar.add_task(description, total=total)

        def advance(n: int = 1, *, description: str | None = None) -> None:
            bar.update(task_id, advance=n, description=description)

        yield advance
