"""The task sources the tasks stage reads: the seam a new source plugs into.

A source is a module with a loader ``load(section, root) -> Loaded``: `section` is its own
settings (``params.yaml`` ``tasks.<name>``, a section of `TasksSettings`), `root` the
project root its files are relative to. It returns its tasks (their `source` column is the
source's name, its section's) and a report of what it left out, or None when it leaves
nothing out. Its registration is one entry of `judgelab.config.tasks.TASK_SOURCES`, which
names the loader ("module:function", imported here when the source is read) beside its
section, so adding a source (MBPP from a file, APPS, your company's tasks) is its module, its
section and entry, and its test; training, the probes and the analysis read the tasks table
and never a source. AutoRL has no loader: its requests are written by the policy, so the
stage serves a model for it (judgelab.flows.tasks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgelab.config.tasks import TASK_SOURCES, SourceLoader
from judgelab.errors import ConfigError
from judgelab.tasks.loaded import Loaded

if TYPE_CHECKING:
    from judgelab.config import TasksSettings
    from judgelab.verdicts import Task

Loader = Callable[[Any, Path], Loaded]
# (section, root, ids) -> the tasks of `ids` this source holds, built whether or not the
# source is enabled; None: load the source and pick them.
ByIds = Callable[[Any, Path, Sequence[str]], "list[Task]"]


def _imported(path: str | None) -> Any:
    """The function a registration names as "module:function" (its module imported now)."""
    if path is None:
        return None
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


@dataclass(frozen=True)
class TaskSource:
    name: str  # the `source` column of its tasks and its section under `tasks:`
    registration: SourceLoader

    @property
    def doc(self) -> str:
        return self.registration.doc

    @property
    def loader(self) -> Loader | None:
        """None for a source the stage itself drives (AutoRL)."""
        loader: Loader | None = _imported(self.registration.load)
        return loader

    @property
    def by_ids(self) -> ByIds | None:
        by_ids: ByIds | None = _imported(self.registration.by_ids)
        return by_ids

    def load(self, tasks: TasksSettings, root: Path) -> Loaded:
        loader = self.loader
        if loader is None:
            raise ValueError(f"task source {self.name!r} has no loader (the stage drives it)")
        return loader(getattr(tasks, self.name), root)


# In the order their tasks enter the table (HumanEval, your files, CodeI/O, then AutoRL).
SOURCES: tuple[TaskSource, ...] = tuple(TaskSource(n, r) for n, r in TASK_SOURCES.items())
SOURCE_NAMES: tuple[str, ...] = tuple(TASK_SOURCES)


def source(name: str) -> TaskSource:
    for s in SOURCES:
        if s.name == name:
            return s
    raise KeyError(f"unknown task source {name!r}; known: {', '.join(SOURCE_NAMES)}")


def load_sources(tasks: TasksSettings, root: Path) -> tuple[list[Task], dict[str, Any]]:
    """Every source with a loader, in order: their tasks and their reports by source name."""
    out: list[Task] = []
    reports: dict[str, Any] = {}
    for s in SOURCES:
        if s.registration.load is None:
            continue
        loaded = s.load(tasks, root)
        out += loaded.tasks
        if loaded.report is not None:
            reports[s.name] = loaded.report
    return out, reports


def tasks_by_id(tasks: TasksSettings, root: Path, ids: Sequence[str], where: str) -> list[Task]:
    """The tasks named by `ids`, in that order, each built by the source that holds it with
    that source's settings (the tests the tasks table has), whether or not it is enabled: the
    probes name their tasks so. An id no source holds is an error naming `where`."""
    found: dict[str, Task] = {}
    for s in SOURCES:
        wanted = [i for i in ids if i not in found]
        if not wanted or s.registration.load is None:
            continue
        section = getattr(tasks, s.name)
        by_ids = s.by_ids
        if by_ids is not None:
            picked = by_ids(section, root, wanted)
        else:
            picked = [t for t in s.load(tasks, root).tasks if t.task_id in wanted]
        found.update((t.task_id, t) for t in picked)
    unknown = [i for i in ids if i not in found]
    if unknown:
        raise ConfigError(
            f"{where}: no task source holds {unknown}; ids are HumanEval/0 .. HumanEval/163, "
            "codeio-hq/<n> or codeio/<n> (an item of that file), or a task_id of tasks.files"
        )
    return [found[i] for i in ids]
