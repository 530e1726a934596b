"""What a task source's loader returns (`judgelab.tasks.registry`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from judgelab.verdicts import Task


@dataclass(frozen=True)
class Loaded:
    tasks: list[Task]
    report: dict[str, Any] | None = None  # what the source left out and why (None: nothing)
