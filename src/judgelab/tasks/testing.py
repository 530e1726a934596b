"""How a task's tests run against code, in the sandbox: what the trusted tester runs for a task
(`truth_tests`), the program the code becomes (`candidate_module`), and how values returned
for tests judgelab wrote are compared with the expected ones, which never leave this process
(`wrong_case`, `same_output`), and what a run says (`judged`: the outcome and its reason),
which the execution evaluator turns into a verdict (`judgelab.evaluators.execution`) and the
CodeI/O source's reference check into a pass (`passes`).
`ast` here only parses: the code is executed only in the sandbox (docs/SECURITY.md).
"""

from __future__ import annotations

import ast
import functools
import json
import math
import threading
import warnings
from typing import Any

from judgelab.sandbox import CallTests, CheckTests, Limits, TestRun, run_tests
from judgelab.tasks.files import io_cases
from judgelab.verdicts import Task

FLOAT_REL_TOL, FLOAT_ABS_TOL = 1e-6, 1e-9


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
    for tests judgelab wrote (input/output pairs), the calls alone: their expected values stay
    in this process (`wrong_case` compares)."""
    assert task.test is not None and task.entry_point is not None
    cases = call_cases(task.test)
    if cases is None:
        prelude = prompt_preamble(task.prompt, task.entry_point)
        return CheckTests(task.entry_point, task.test, prelude)
    return CallTests(task.entry_point, [args for args, _ in cases])


def candidate_module(task: Task, code: str) -> str:
    """main.py for `code`: the prompt's preamble then a standalone answer (one that defines
    the entry point), or the prompt followed by a completion-style answer (the body only)."""
    assert task.entry_point is not None
    if defines_function(code, task.entry_point):
        return prompt_preamble(task.prompt, task.entry_point) + "\n\n\n" + code + "\n"
    return task.prompt + code + "\n"


def wrong_case(returned: list[Any], cases: list[tuple[Any, Any]], entry_point: str) -> str | None:
    """The first case whose returned value differs from the expected one, or None."""
    for i, ((args, expected), got) in enumerate(zip(cases, returned, strict=True)):
        shown = f"(**{args!r})" if isinstance(args, dict) else repr(tuple(args))
        call = f"case {i}: {entry_point}{shown}"
        try:
            value = normalised(got)
        except (TypeError, ValueError):
            return f"{call} returned a {type(got).__name__}, which JSON cannot carry"
        want = normalised(expected)
        if not same_output(value, want):
            text = json.dumps(value, sort_keys=True)
            return f"{call} returned {text[:60]}, expected {json.dumps(want)[:60]}"
    return None


def normalised(value: Any) -> Any:
    """`value` as the comparison sees it: through JSON, sets as sorted lists, complex numbers
    as [real, imag], bytes as latin-1 text, tuples as lists."""
    return json.loads(json.dumps(value, allow_nan=True, sort_keys=True, default=_unjson))


def _unjson(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, complex):
        return [value.real, value.imag]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    raise TypeError(type(value).__name__)


def same_output(got: Any, expected: Any) -> bool:
    """The io-mode comparison of two JSON values. Numbers (not booleans) are equal within a
    relative 1e-6 or an absolute 1e-9, and NaN equals NaN; a boolean equals only a boolean;
    lists (a tuple is reported as a list) equal item by item; objects key by key; the rest
    by ==."""
    if isinstance(got, bool) or isinstance(expected, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(got, int | float) and isinstance(expected, int | float):
        if math.isnan(got) or math.isnan(expected):
            return math.isnan(got) and math.isnan(expected)
        return math.isclose(got, expected, rel_tol=FLOAT_REL_TOL, abs_tol=FLOAT_ABS_TOL)
    if isinstance(got, list) and isinstance(expected, list):
        return len(got) == len(expected) and all(map(same_output, got, expected))
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(
            same_output(got[k], expected[k]) for k in expected
        )
    return type(got) is type(expected) and got == expected


# Reasons that name an outcome by themselves.
PASSED = "tests passed"
FAILED = "tests failed: "  # + what failed: the test's exception, or the code's
FORGED = "forged: "  # + what the code did to fake an answer


def judged(run: TestRun, cases: list[tuple[Any, Any]] | None, entry_point: str) -> tuple[str, str]:
    """A run of a task's tests as (outcome, reason): the outcome one of ``passed``,
    ``tests_failed``, ``forged``, ``not_parsed`` or ``sandbox_error`` (the sandbox's fault, not
    the code's), the reason saying which, in full. Values returned for `cases` (tests judgelab
    wrote) are compared here."""
    if run.outcome == "passed":
        wrong = None if cases is None else wrong_case(run.values or [], cases, entry_point)
        return ("passed", PASSED) if wrong is None else ("tests_failed", f"{FAILED}{wrong}")
    if run.outcome == "error":
        return "sandbox_error", run.reason or "sandbox error"
    if run.outcome == "forged":
        return "forged", f"{FORGED}{run.reason}"
    if run.outcome == "not_parsed":
        return "not_parsed", f"{FAILED}{run.reason}"
    if run.outcome == "failed" and run.failed_case is not None:
        return "tests_failed", f"{FAILED}case {run.failed_case}: {run.reason}"
    if run.outcome == "failed":
        return "tests_failed", f"{FAILED}{run.reason}"
    return "tests_failed", run.reason  # timeout, memory, killed: the sandbox says which


def passes(task: Task, code: str, limits: Limits) -> tuple[bool | None, str]:
    """Whether `code` (a whole answer's code) passes `task`'s tests, as the execution evaluator
    runs them: (True, ""), (False, what failed), or (None, why) when the sandbox could not
    judge it."""
    assert task.test is not None and task.entry_point is not None
    run = run_tests(candidate_module(task, code), truth_tests(task), limits)
    outcome, reason = judged(run, call_cases(task.test), task.entry_point)
    if outcome == "sandbox_error":
        return None, reason
    return (True, "") if outcome == "passed" else (False, reason)
