"""Execution evaluator: the candidate's code against the task's tests, through the sandbox.

Contract of `ExecutionJudge.score_one(task, candidate) -> Verdict`, per candidate:
- task without tests (AutoRL)          -> unscored "task has no tests"
- no code in the answer                -> scored 0.0, reason "no code in answer"
- every test passed                    -> scored 1.0, reason "tests passed"
- the code faked an answer             -> scored 0.0, reason "forged: <what it did>" (a reply
  that is not plain data, e.g. an object equal to everything; a write to the reply pipe that
  is no reply; an exit with status 0 before answering)
- tests failed / exited before answering / timeout / memory / killed -> scored 0.0; `reason`
  says which, `explanation` is a short tail of the code's stderr and the tests' traceback. A
  program that does not compile fails too, before any test runs: reason "tests failed:
  SyntaxError: ..." (or IndentationError, TabError), outcome not_parsed.
- the sandbox or the tests themselves failed (our fault, not the code's) -> unscored
latency_s is the sandbox's duration.

Every verdict also names its outcome (`Verdict.outcome`, the scores table's `outcome`
column): one of `verdicts.OUTCOMES`, of which UNPARSEABLE are the answers whose code never ran
(no code, or code that does not compile). The analysis and training read that column; nothing
parses a reason back.

How the tests run (judgelab.sandbox.run_tests; docs/SECURITY.md): the code is imported in the
sandbox (`candidate_module`: the prompt's own imports and helpers, then the answer, so the
answer's definitions win; a completion-style answer, the body only, follows the prompt) and
only answers calls. The task's tests run in the trusted tester, another process: HumanEval's
`check` with the prompt's helpers beside it, calling the candidate through a forwarder.
Tests judgelab writes itself (input/output pairs, tasks.files.check_function) are calls whose
returned values come back here and are compared by `same_output`: their expected values never
leave this process. The code is executed only in the sandbox; `ast` here only parses.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import logging
import math
import os
import threading
import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from judgelab.answer import parse_answer
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.evaluators.extended import extended_cases
from judgelab.evaluators.settings import ExecutionSettings
from judgelab.sandbox import CallTests, CheckTests, Limits, TestRun, run_tests
from judgelab.tasks.files import io_cases
from judgelab.verdicts import Candidate, Task, Verdict

log = logging.getLogger(__name__)

EXPLANATION_CHARS = 600
REASON_CHARS = 200

# Reasons that name an outcome by themselves.
NO_TESTS = "task has no tests"
NO_CODE = "no code in answer"
PASSED = "tests passed"
FAILED = "tests failed: "  # + what failed: the test's exception, or the code's
FORGED = "forged: "  # + what the code did to fake an answer
EXTENDED = "extended: "  # + why code that passed the task's own tests failed the extra ones
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
def _io_cases(test: str) -> list[tuple[Any, Any]] | None:
    """io_cases, parsed once per tests (a task's candidates share them): read, never changed."""
    return io_cases(test)


def truth_tests(task: Task) -> CheckTests | CallTests:
    """What the trusted tester runs for `task`: its own `check` with the prompt's helpers, or,
    for tests judgelab wrote (input/output pairs), the calls alone: their expected values stay
    in this process (`_wrong_case` compares)."""
    assert task.test is not None and task.entry_point is not None
    cases = _io_cases(task.test)
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


class ExecutionJudge(PointwiseEvaluator):
    """Runs the candidate's code against the task's unit tests in the sandbox."""

    protocol = "execution"
    spec: ExecutionSettings
    # every run in its own uids, namespaces and temp dir (judgelab.sandbox): one per core
    concurrency = max(1, len(os.sched_getaffinity(0)))

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        # `repeat` is accepted for the common evaluator signature; execution is deterministic.
        if not task.test or not task.entry_point:
            return Verdict.unscored(NO_TESTS, outcome="no_tests")
        code = parse_answer(candidate.completion).code
        if code is None:
            return Verdict.scored(0.0, reason=NO_CODE, outcome="no_code")
        limits = Limits(self.spec.timeout_s, self.spec.cpu_s, self.spec.memory_mb)
        module = candidate_module(task, code)
        verdict = self._verdict(run_tests(module, truth_tests(task), limits), task.entry_point,
                                _io_cases(task.test))  # fmt: skip
        if self.spec.tests == "extended" and verdict.outcome == "passed":
            return self.extended_verdict(task, module, limits, verdict)
        return verdict

    def extended_verdict(
        self, task: Task, module: str, limits: Limits, original: Verdict
    ) -> Verdict:
        """The verdict on the extra tests, for code that passed the original ones: their
        inputs are calls, their expected values (the reference's) stay here."""
        assert task.entry_point is not None
        extra = extended_cases(task, self.spec.extended_inputs, self.spec.extended_seed, limits)
        if not extra.cases:
            return original
        args = [list(a) for a, _ in extra.cases]
        run = run_tests(module, CallTests(task.entry_point, args), limits)
        verdict = self._verdict(run, task.entry_point, [(a, e) for a, e in extra.cases])
        latency = original.latency_s + verdict.latency_s
        if verdict.outcome == "passed":
            return dataclasses.replace(original, latency_s=latency)
        reason = EXTENDED + (verdict.reason or "")
        return dataclasses.replace(verdict, reason=reason[:REASON_CHARS], latency_s=latency)

    def score_many(
        self, pairs: Iterable[tuple[Task, Candidate]], workers: int = 2
    ) -> list[Verdict]:
        """Score (task, candidate) pairs in a small thread pool; verdicts in input order."""
        pairs = list(pairs)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(lambda pair: self.score_one(*pair), pairs))

    def _verdict(
        self, run: TestRun, entry_point: str, cases: list[tuple[Any, Any]] | None
    ) -> Verdict:
        explanation = run.detail[-EXPLANATION_CHARS:].strip() or None
        common = {"explanation": explanation, "latency_s": run.duration_s}
        if run.outcome == "passed":
            wrong = None if cases is None else _wrong_case(run.values or [], cases, entry_point)
            if wrong is not None:
                reason = f"{FAILED}{wrong}"[:REASON_CHARS]
                return Verdict.scored(0.0, reason=reason, outcome="tests_failed", **common)  # type: ignore[arg-type]
            return Verdict.scored(1.0, reason=PASSED, outcome="passed", latency_s=run.duration_s)
        if run.outcome == "error":
            return Verdict.unscored(run.reason[:REASON_CHARS] or "sandbox error",
                                    outcome="sandbox_error", **common)  # fmt: skip
        if run.outcome == "forged":
            reason = f"{FORGED}{run.reason}"[:REASON_CHARS]
            return Verdict.scored(0.0, reason=reason, outcome="forged", **common)  # type: ignore[arg-type]
        if run.outcome == "not_parsed":
            reason = f"{FAILED}{run.reason}"[:REASON_CHARS]
            return Verdict.scored(0.0, reason=reason, outcome="not_parsed", **common)  # type: ignore[arg-type]
        reason = run.reason if run.outcome != "failed" else f"{FAILED}{run.reason}"
        if run.outcome == "failed" and run.failed_case is not None:
            reason = f"{FAILED}case {run.failed_case}: {run.reason}"
        return Verdict.scored(0.0, reason=reason[:REASON_CHARS], outcome="tests_failed", **common)  # type: ignore[arg-type]


def _wrong_case(
    returned: list[Any], cases: list[tuple[Any, Any]], entry_point: str
) -> str | None:
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
