"""Verdicts from judgelab tasks' tests, run in the sandbox: the guard's truth where a task has
tests. The verdict is the execution evaluator's own (`ExecutionEvaluator.code_verdict`: one
verdict builder, tasks.testing.judge, and one set of limits, `limits_of`), so the guard,
scoring and training judge a program alike. Generated code runs only there."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from judgelab.config.evaluators import DEFAULT_EXECUTION, ExecutionSettings
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.verdicts import Task


def task_verdict(
    tasks: Mapping[str, Task], settings: ExecutionSettings = DEFAULT_EXECUTION
) -> Callable[[str, str], bool | None]:
    """verdict(key, code): whether `code` passes the tests of `tasks[key]` (True / False), or
    None when the sandbox could not run them (judgelab's own failure: docs/SECURITY.md), as
    the execution evaluator of `settings` judges it (its limits, its `tests`). `code` is a
    whole answer or a completion of the task's prompt (`testing.candidate_module` tells
    which). An unknown key raises KeyError, naming it: a task without tests has no verdict to
    give. A (key, code) already judged is not run again (a judge that runs the tests and the
    guard ask for the same completions; a policy repeats itself); a None (the sandbox
    failed) is not kept, so it is retried."""
    evaluator = ExecutionEvaluator(settings)
    known: dict[tuple[str, str], bool] = {}

    def verdict(key: str, code: str) -> bool | None:
        if key not in tasks:
            raise KeyError(f"no task {key!r} among the guard's {len(tasks)} tasks")
        if (key, code) in known:
            return known[key, code]
        judged = evaluator.code_verdict(tasks[key], code)
        if judged.status != "scored":
            return None
        known[key, code] = ok = judged.score == 1.0
        return ok

    return verdict
