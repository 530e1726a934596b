"""Execution evaluator: run the candidate's code against the task's tests in the sandbox.

Contract of `ExecutionJudge.score_one(task, candidate) -> Verdict`, per candidate:
- task without tests (AutoRL)          -> unscored "task has no tests"
- no code in the answer                -> scored 0.0, reason "no code in answer"
- sandbox passed (exit 0)              -> scored 1.0, reason "tests passed"
- tests failed / timeout / memory / killed -> scored 0.0; `reason` says which, `explanation`
  is a short tail of stderr (the traceback's end). A program that does not compile fails
  too, before any test runs: reason "tests failed: SyntaxError: ..." (or IndentationError,
  TabError) and, as its explanation, the interpreter's report of where, with no traceback.
- sandbox status "error" (our fault, not the code's) -> unscored with the sandbox's reason
latency_s is the sandbox's duration.

`outcome(status, score, reason, explanation)` reads back which of these a verdict (a row of
the scores table) is: one of OUTCOMES, of which UNPARSEABLE are the answers whose code never
ran (no code, or code that does not parse). The analysis takes its truth figures on parseable
code only by it.

The program run for a HumanEval-style task (prompt, entry_point, test) is:
- when the extracted code defines `entry_point` as a top-level function (a standalone
  answer): the prompt's top-level statements other than the entry point's stub (its
  imports and helper functions, e.g. HumanEval/10's `is_palindrome`), then the code, so
  the code's own definitions win;
- otherwise (a completion-style answer: the function body only): prompt + code;
followed by task.test and `check(<entry_point>)`. The code is executed only in
`judgelab.evaluators.sandbox`, never in this process; `ast` here only parses.
"""

from __future__ import annotations

import ast
import logging
import os
import re
import signal
import threading
import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from judgelab.answer import parse_answer
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.evaluators.registry import ExecutionEvaluator
from judgelab.evaluators.sandbox import SandboxResult, run_python
from judgelab.verdicts import Candidate, Task, Verdict

log = logging.getLogger(__name__)

EXPLANATION_CHARS = 600
REASON_CHARS = 200

# Reasons that name an outcome by themselves.
NO_TESTS = "task has no tests"
NO_CODE = "no code in answer"
PASSED = "tests passed"
FAILED = "tests failed: "  # + the last line of stderr
FORGED = "forged: "  # + what the code did to fake a pass (it left early, or forged a value)

Outcome = Literal[
    "passed", "tests_failed", "forged", "not_parsed", "no_code", "sandbox_error", "no_tests"
]
OUTCOMES: tuple[Outcome, ...] = (
    "passed",
    "tests_failed",  # the code ran and did not pass: a test, timeout, memory, a signal
    "forged",  # the code tried to fake a pass (left before the tests finished, a forged value)
    "not_parsed",  # the program did not compile: no test ran
    "no_code",  # nothing to run
    "sandbox_error",  # the sandbox could not run it: no verdict on the code
    "no_tests",  # the task has no tests: no verdict on the code
)
UNPARSEABLE: tuple[Outcome, ...] = ("no_code", "not_parsed")
_COMPILE_ERRORS = ("SyntaxError:", "IndentationError:", "TabError:")
# CPython reports a script it cannot compile as the place (`File ".../main.py", line N`) with
# no traceback; a SyntaxError raised while the program runs (exec, compile, an import) comes
# after "Traceback (most recent call last):" and frame lines that end `, in <function>`.
_NOT_COMPILED = re.compile(r'^\s*File "(?:[^"]*/)?main\.py", line \d+$', re.MULTILINE)
_TRACEBACK = "Traceback (most recent call last):"


# CPython 3.11's parser is not thread-safe: two threads in ast.parse at once (score_many's
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


def build_program(task: Task, code: str) -> str:
    """The program that runs `code` against the tests of `task` (see module docstring)."""
    assert task.test is not None and task.entry_point is not None
    if defines_function(code, task.entry_point):
        head = prompt_preamble(task.prompt, task.entry_point) + "\n\n\n" + code
    else:
        head = task.prompt + code
    return f"{head}\n\n\n{task.test}\n\ncheck({task.entry_point})\n"


def outcome(
    status: str, score: float | None, reason: str | None, explanation: str | None
) -> Outcome:
    """Which outcome a verdict of this evaluator is, from what it wrote (see the module
    docstring). A compile error is told from a test that failed by the interpreter's report in
    the explanation; one whose report was cut off reads as a failed test."""
    if status != "scored":
        return "no_tests" if reason == NO_TESTS else "sandbox_error"
    if score is not None and score >= 1.0:
        return "passed"
    if reason == NO_CODE:
        return "no_code"
    if (reason or "").startswith(FORGED):
        return "forged"
    text = explanation or ""
    compile_error = (reason or "").removeprefix(FAILED).startswith(_COMPILE_ERRORS)
    if compile_error and _TRACEBACK not in text and _NOT_COMPILED.search(text):
        return "not_parsed"
    return "tests_failed"


def _last_line(text: str) -> str:
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")


def _signal_name(exit_code: int | None) -> str:
    try:
        return signal.Signals(-(exit_code or 0)).name
    except ValueError:
        return f"signal {-(exit_code or 0)}"


class ExecutionJudge(PointwiseEvaluator):
    """Runs the candidate's code against the task's unit tests in the sandbox."""

    protocol = "execution"
    spec: ExecutionEvaluator
    # every run in its own uid, namespaces and temp dir (sandbox.py): one per core at once
    concurrency = max(1, len(os.sched_getaffinity(0)))

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        # `repeat` is accepted for the common evaluator signature; execution is deterministic.
        if not task.test or not task.entry_point:
            return Verdict.unscored(NO_TESTS)
        code = parse_answer(candidate.completion).code
        if code is None:
            return Verdict.scored(0.0, reason=NO_CODE)
        result = run_python(
            build_program(task, code),
            timeout_s=self.spec.timeout_s,
            cpu_s=self.spec.cpu_s,
            memory_mb=self.spec.memory_mb,
        )
        return self._verdict(result)

    def score_many(
        self, pairs: Iterable[tuple[Task, Candidate]], workers: int = 2
    ) -> list[Verdict]:
        """Score (task, candidate) pairs in a small thread pool; verdicts in input order."""
        pairs = list(pairs)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(lambda pair: self.score_one(*pair), pairs))

    def _verdict(self, result: SandboxResult) -> Verdict:
        explanation = result.stderr_tail[-EXPLANATION_CHARS:].strip() or None
        common = {"explanation": explanation, "latency_s": result.duration_s}
        if result.status == "passed":
            return Verdict.scored(1.0, reason=PASSED, latency_s=result.duration_s)
        if result.status == "error":
            return Verdict.unscored(result.stderr_tail[:REASON_CHARS] or "sandbox error",
                                    latency_s=result.duration_s)  # fmt: skip
        if result.status == "failed":
            last = _last_line(result.stderr_tail) or f"exit code {result.exit_code}"
            reason = f"{FAILED}{last}"
        elif result.status == "timeout":
            reason = (
                f"timeout after {self.spec.timeout_s:g}s"
                if result.timed_out
                else f"cpu limit of {self.spec.cpu_s:g}s exceeded"
            )
        elif result.status == "memory":
            reason = f"memory limit of {self.spec.memory_mb} MB exceeded"
        else:
            reason = f"killed by {_signal_name(result.exit_code)}"
        return Verdict.scored(0.0, reason=reason[:REASON_CHARS], **common)  # type: ignore[arg-type]
