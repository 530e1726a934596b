"""How a task's tests run against code, in the sandbox: what the trusted tester runs for a task
(`truth_tests`: its own check, or the calls and expected values of tests judgelab wrote, which
the tester compares, judgelab.sandbox.compare), the program the code becomes
(`candidate_module`), what a run says (`judged`: the outcome and its reason) and the one
verdict builder of the execution truth (`judge`), which the execution evaluator turns into a
Verdict (`judgelab.evaluators.execution`, used by scoring, training and the guard) and the
CodeI/O source's reference check into a pass (`passes`).
`ast` here only parses: the code is executed only in the sandbox (docs/SECURITY.md).
"""

from __future__ import annotations

import ast
import functools
import threading
import warnings
from dataclasses import dataclass
from typing import Any

from judgelab.sandbox import CallTests, CheckTests, Limits, TestRun, compare, run_tests
from judgelab.tasks.files import io_cases, io_tolerance
from judgelab.verdicts import Task

REL_TOL, ABS_TOL = compare.REL_TOL, compare.ABS_TOL  # a task's default float tolerance


# CPython 3.11's parser is not thread-safe: two threads in ast.parse at once (a scoring
# pool) can fail with "SystemError: AST constructor recursion depth mismatch" (gh-106905),
# and warnings.catch_warnings is process-wide. One parse at a time; a parse takes well under
# a millisecond, the sandboxed run it precedes tens of milliseconds.
_PARSE_LOCK = threading.Lock()


def _parse(source: str) -> ast.Module | None:
    try:
        with _PARSE_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def defines_function(code: str, name: str) -> bool:
    """True when `code` parses and defines `name` as a top-level (async) function."""
    tree = _parse(code)
    if tree is None:
        return False
    defs = (ast.FunctionDef, ast.AsyncFunctionDef)
    return any(isinstance(node, defs) and node.name == name for node in tree.body)


def prompt_preamble(prompt: str, entry_point: str) -> str:
    """The prompt without the entry point's stub: its imports, constants and helpers."""
    tree = _parse(prompt)
    if tree is None:  # keep at least the import lines
        lines = prompt.splitlines()
        return "\n".join(ln for ln in lines if ln.startswith(("import ", "from ")))
    lines = prompt.splitlines()
    kept = []
    for node in tree.body:
        is_stub = isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
            node.name == entry_point
        )
        if not is_stub:
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            kept.append("\n".join(lines[start - 1 : node.end_lineno]))
    return "\n\n".join(kept)


@functools.lru_cache(maxsize=256)
def call_cases(test: str) -> list[tuple[Any, Any]] | None:
    """io_cases, parsed once per tests (a task's candidates share them): read, never changed."""
    return io_cases(test)


def truth_tests(task: Task) -> CheckTests | CallTests:
    """What the trusted tester runs for `task`: its own `check` with the prompt's helpers, or,
    for tests judgelab wrote (input/output pairs), the calls with their expected values, which
    the tester compares (compare.same, within the task's float tolerance)."""
    assert task.test is not None and task.entry_point is not None
    cases = call_cases(task.test)
    if cases is None:
        prelude = prompt_preamble(task.prompt, task.entry_point)
        return CheckTests(task.entry_point, task.test, prelude)
    expected = [want for _, want in cases]
    tolerance = io_tolerance(task.test)
    return CallTests(task.entry_point, [a for a, _ in cases], expected, rel_tol=tolerance)


def candidate_module(task: Task, code: str) -> str:
    """main.py for `code`: the prompt's preamble then a standalone answer (one that defines
    the entry point), or the prompt followed by a completion-style answer (the body only)."""
    assert task.entry_point is not None
    if defines_function(code, task.entry_point):
        return prompt_preamble(task.prompt, task.entry_point) + "\n\n\n" + code + "\n"
    return task.prompt + code + "\n"


def same_output(got: Any, expected: Any, rel_tol: float = REL_TOL) -> bool:
    """The io-mode comparison (judgelab.sandbox.compare.same, whose docstring states it) of
    two values of judgelab's own: integers, booleans and text exactly, a float within
    `rel_tol`. A candidate's values are compared in the tester, never here."""
    return compare.same(compare.normal(got), compare.normal(expected), rel_tol, ABS_TOL)


# Reasons that name an outcome by themselves.
PASSED = "tests passed"
FAILED = "tests failed: "  # + what failed: the test's exception, or the code's
FORGED = "forged: "  # + what the code did to fake an answer


def judged(run: TestRun, cases: list[tuple[Any, Any]] | None, entry_point: str) -> tuple[str, str]:
    """A run of a task's tests as (outcome, reason): the outcome one of ``passed``,
    ``tests_failed``, ``forged``, ``not_parsed`` or ``sandbox_error`` (the sandbox's fault, not
    the code's; docs/SECURITY.md lists each way there), the reason saying which, in full."""
    if run.outcome == "passed":
        return "passed", PASSED
    if run.outcome == "error":
        return "sandbox_error", run.reason or "sandbox error"
    if run.outcome == "forged":
        return "forged", f"{FORGED}{run.reason}"
    if run.outcome == "not_parsed":
        return "not_parsed", f"{FAILED}{run.reason}"
    if run.outcome == "failed" and run.got is not None and cases is not None:
        return "tests_failed", f"{FAILED}{_wrong(run, cases, entry_point)}"
    if run.outcome == "failed" and run.failed_case is not None:
        return "tests_failed", f"{FAILED}case {run.failed_case}: {run.reason}"
    if run.outcome == "failed":
        return "tests_failed", f"{FAILED}{run.reason}"
    return "tests_failed", run.reason  # timeout, memory, killed: the sandbox says which


def _wrong(run: TestRun, cases: list[tuple[Any, Any]], entry_point: str) -> str:
    """The reason for a value the tester found wrong: the call, what it returned, and what
    was expected (each cut to compare.SHOWN characters)."""
    case = run.failed_case or 0
    args, want = cases[case]
    shown = f"(**{args!r})" if isinstance(args, dict) else repr(tuple(args))
    expected = compare.shown(compare.normal(want))
    return f"case {case}: {entry_point}{shown} returned {run.got}, expected {expected}"


@dataclass(frozen=True)
class Judged:
    """One verdict of the execution truth on a program: its outcome and reason (`judged`),
    and the run they read."""

    outcome: str
    reason: str
    run: TestRun

    @property
    def passed(self) -> bool | None:
        """True / False, or None when the sandbox could not judge (outcome sandbox_error)."""
        return None if self.outcome == "sandbox_error" else self.outcome == "passed"


def judge(task: Task, code: str, limits: Limits, tests: CallTests | None = None) -> Judged:
    """The verdict builder of the execution truth, which the execution evaluator, the guard
    and training share (through `ExecutionEvaluator`) and CodeI/O's reference check uses:
    `code` (a whole answer's code, or a completion of the prompt) against `task`'s tests, or
    against `tests` (calls with their expected values: the extended tests), in the sandbox."""
    assert task.test is not None and task.entry_point is not None
    module = candidate_module(task, code)
    run = run_tests(module, tests or truth_tests(task), limits)
    cases = call_cases(task.test) if tests is None else _pairs(tests)
    outcome, reason = judged(run, cases, task.entry_point)
    return Judged(outcome, reason, run)


def _pairs(tests: CallTests) -> list[tuple[Any, Any]]:
    return list(zip(tests.cases, tests.expected or [None] * len(tests.cases), strict=True))


def passes(task: Task, code: str, limits: Limits) -> tuple[bool | None, str]:
    """`judge`, as a pass: (True, ""), (False, what failed), or (None, why) when the sandbox
    could not judge it."""
    verdict = judge(task, code, limits)
    return verdict.passed, "" if verdict.outcome == "passed" else verdict.reason
