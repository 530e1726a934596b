"""Verdicts from judgelab tasks' tests, run in the sandbox (`judgelab.tasks.testing.passes`, as
the execution evaluator runs them): the guard's truth where a task has tests. Generated code
runs only there."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from judgelab.sandbox import Limits
from judgelab.tasks.testing import passes
from judgelab.verdicts import Task

DEFAULT_LIMITS = Limits(timeout_s=10.0, cpu_s=5.0)


def task_verdict(
    tasks: Mapping[str, Task], limits: Limits = DEFAULT_LIMITS
) -> Callable[[str, str], bool | None]:
    """verdict(key, code): whether `code` passes the tests of `tasks[key]` (True / False), or
    None when the sandbox could not run them. `code` is a whole answer or a completion of the
    task's prompt (`testing.candidate_module` tells which). An unknown key raises KeyError,
    naming it: a task without tests has no verdict to give. A (key, code) already judged is
    not run again (a judge that runs the tests and the guard ask for the same completions; a
    policy repeats itself); a None (the sandbox failed) is not kept, so it is retried."""
    known: dict[tuple[str, str], bool] = {}

    def verdict(key: str, code: str) -> bool | None:
        if key not in tasks:
            raise KeyError(f"no task {key!r} among the guard's {len(tasks)} tasks")
        if (key, code) in known:
            return known[key, code]
        ok, _reason = passes(tasks[key], code, limits)
        if ok is not None:
            known[key, code] = ok
        return ok

    return verdict
