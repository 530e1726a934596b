"""Execution evaluator: run the candidate's code against the task's tests in the sandbox.

Contract of `ExecutionJudge.score_one(task, candidate) -> Verdict`, per candidate:
- task without tests (AutoRL)          -> unscored "task has no tests"
- no code in the answer                -> scored 0.0, reason "no code in answer"
- the harness saw every test pass      -> scored 1.0, reason "tests passed"
- the code faked a pass                -> scored 0.0, reason "forged: <what it did>" (it left
  before the tests finished with status 0, returned an object that answers comparisons for
  itself, changed builtins or a standard module, or wrote a false pass)
- tests failed / timeout / memory / killed -> scored 0.0; `reason` says which, `explanation`
  is a short tail of stderr (the traceback's end). A program that does not compile fails
  too, before any test runs: reason "tests failed: SyntaxError: ..." (or IndentationError,
  TabError) and, as its explanation, the interpreter's report of where, with no traceback.
- sandbox status "error" (our fault, not the code's) -> unscored with the sandbox's reason
latency_s is the sandbox's duration.

Every verdict also names its outcome (`Verdict.outcome`, the scores table's `outcome`
column): one of `verdicts.OUTCOMES`, of which UNPARSEABLE are the answers whose code never ran
(no code, or code that does not compile). The analysis and training read that column; nothing
parses a reason back.

The program run for a HumanEval-style task (prompt, entry_point, test) is:
- when the extracted code defines `entry_point` as a top-level function (a standalone
  answer): the prompt's top-level statements other than the entry point's stub (its
  imports and helper functions, e.g. HumanEval/10's `is_palindrome`), then the code, so
  the code's own definitions win;
- otherwise (a completion-style answer: the function body only): prompt + code;
followed by task.test and `check(<entry_point>)`. It runs under the harness (harness.py; its
docstring says what it guards against), which alone can report a pass, with a secret of the
run's own: an exit status never passes. Tests judgelab writes itself (input/output pairs,
tasks.files.check_function) run in io mode: the harness returns what each call returned, as
JSON, and the comparison (`same_output`) happens here, out of the code's reach. The code is
executed only in `judgelab.evaluators.sandbox`, never in this process; `ast` here only parses.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import os
import re
import secrets
import signal
import threading
import warnings
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judgelab.answer import parse_answer
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.evaluators.sandbox import Runner, SandboxResult, run_python
from judgelab.evaluators.settings import ExecutionSettings
from judgelab.tasks.files import io_cases
from judgelab.verdicts import Candidate, Outcome, Task, Verdict

log = logging.getLogger(__name__)

EXPLANATION_CHARS = 600
REASON_CHARS = 200

# Reasons that name an outcome by themselves.
NO_TESTS = "task has no tests"
NO_CODE = "no code in answer"
PASSED = "tests passed"
FAILED = "tests failed: "  # + the last line of stderr
FORGED = "forged: "  # + what the code did to fake a pass (it left early, or forged a value)

_COMPILE_ERRORS = ("SyntaxError:", "IndentationError:", "TabError:")
# CPython reports a script it cannot compile as the place (`File ".../main.py", line N`) with
# no traceback; a SyntaxError raised while the program runs (exec, compile, an import) comes
# after "Traceback (most recent call last):" and frame lines that end `, in <function>`.
_NOT_COMPILED = re.compile(r'^\s*File "(?:[^"]*/)?main\.py", line \d+$', re.MULTILINE)
_TRACEBACK = "Traceback (most recent call last):"
HARNESS = (Path(__file__).parent / "harness.py").read_text(encoding="utf-8")
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


@dataclass(frozen=True)
class Program:
    """main.py for one run, with where the harness finds its parts (1-based lines)."""

    text: str
    trusted: tuple[int, int]  # the task's own prompt text: imports and helpers the tests use
    tests_from: int  # task.test's first line


def assemble(task: Task, code: str, io_mode: bool = False) -> Program:
    """The program that runs `code` against the tests of `task` (see module docstring); in io
    mode only the code and its preamble: the expected values never enter the sandbox."""
    assert task.test is not None and task.entry_point is not None
    if defines_function(code, task.entry_point):
        trusted = prompt_preamble(task.prompt, task.entry_point)
        head = trusted + "\n\n\n" + code
    else:
        trusted = task.prompt
        head = task.prompt + code
    last = trusted.count("\n") + (0 if trusted.endswith("\n") else 1)
    trusted_lines = (1, last) if trusted.strip() else (0, 0)
    tests_from = head.count("\n") + 4  # after head and the three line breaks below
    if io_mode:
        return Program(f"{head}\n", trusted_lines, 0)
    text = f"{head}\n\n\n{task.test}\n\ncheck({task.entry_point})\n"
    return Program(text, trusted_lines, tests_from)


def build_program(task: Task, code: str) -> str:
    """The text of `assemble`'s program."""
    return assemble(task, code).text


def _failed(reason: str, explanation: str | None) -> Outcome:
    """A run that did not pass: a program that did not compile (told from a test that failed
    by the interpreter's report, which has no traceback; one whose report was cut off reads
    as a failed test) or code that ran and failed."""
    text = explanation or ""
    compile_error = reason.removeprefix(FAILED).startswith(_COMPILE_ERRORS)
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
    spec: ExecutionSettings
    # every run in its own uid, namespaces and temp dir (sandbox.py): one per core at once
    concurrency = max(1, len(os.sched_getaffinity(0)))

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        # `repeat` is accepted for the common evaluator signature; execution is deterministic.
        if not task.test or not task.entry_point:
            return Verdict.unscored(NO_TESTS, outcome="no_tests")
        code = parse_answer(candidate.completion).code
        if code is None:
            return Verdict.scored(0.0, reason=NO_CODE, outcome="no_code")
        cases = io_cases(task.test)
        program = assemble(task, code, io_mode=cases is not None)
        secret = secrets.token_hex(16)
        spec = {
            "entry_point": task.entry_point,
            "trusted": list(program.trusted),
            "tests_from": program.tests_from,
            "cases": None if cases is None else [args for args, _ in cases],
        }
        result = run_python(
            program.text,
            timeout_s=self.spec.timeout_s,
            cpu_s=self.spec.cpu_s,
            memory_mb=self.spec.memory_mb,
            runner=Runner(HARNESS, stdin=f"{secret}\n{json.dumps(spec)}".encode()),
        )
        return self._verdict(result, secret, task.entry_point, cases)

    def score_many(
        self, pairs: Iterable[tuple[Task, Candidate]], workers: int = 2
    ) -> list[Verdict]:
        """Score (task, candidate) pairs in a small thread pool; verdicts in input order."""
        pairs = list(pairs)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(lambda pair: self.score_one(*pair), pairs))

    def _verdict(
        self,
        result: SandboxResult,
        secret: str,
        entry_point: str,
        cases: list[tuple[Any, Any]] | None,
    ) -> Verdict:
        explanation = result.stderr_tail[-EXPLANATION_CHARS:].strip() or None
        common = {"explanation": explanation, "latency_s": result.duration_s}
        said = result.channel.splitlines()
        forgery = _forgery(said, secret, result)
        if result.status != "error" and forgery is not None:
            reason = f"{FORGED}{forgery}"[:REASON_CHARS]
            return Verdict.scored(0.0, reason=reason, outcome="forged", **common)  # type: ignore[arg-type]
        if result.status == "passed":
            wrong = None if cases is None else _wrong_case(said, secret, cases, entry_point)
            if wrong is not None:
                reason = f"{FAILED}{wrong}"[:REASON_CHARS]
                return Verdict.scored(0.0, reason=reason, outcome="tests_failed", **common)  # type: ignore[arg-type]
            return Verdict.scored(1.0, reason=PASSED, outcome="passed",
                                  latency_s=result.duration_s)  # fmt: skip
        if result.status == "error":
            why = result.stderr_tail[:REASON_CHARS] or "sandbox error"
            return Verdict.unscored(why, outcome="sandbox_error", latency_s=result.duration_s)
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
        reason = reason[:REASON_CHARS]
        failed = _failed(reason, explanation)
        return Verdict.scored(0.0, reason=reason, outcome=failed, **common)  # type: ignore[arg-type]


def _forgery(said: list[str], secret: str, result: SandboxResult) -> str | None:
    """What the code did to fake a pass, from the harness's channel and the exit, or None.
    The channel is the code's to write too: only "forged" lines and passes with this run's
    secret are believed (a forged line only ever fails the code that wrote it)."""
    told = next((line[len("forged ") :] for line in said if line.startswith("forged ")), None)
    if told is not None:
        return told
    passes = [line for line in said if line.startswith("pass ")]
    if any(not _ours(line, secret) for line in passes):
        return "wrote a false pass to the harness's channel"
    if result.status == "passed" and not passes:
        return "exited with status 0 before the tests finished"
    return None


def _ours(line: str, secret: str) -> bool:
    return line == f"pass {secret}" or line.startswith(f"pass {secret} ")


def _wrong_case(
    said: list[str], secret: str, cases: list[tuple[Any, Any]], entry_point: str
) -> str | None:
    """The first io case whose returned value differs from the expected one, or None."""
    line = next(line for line in said if _ours(line, secret))
    try:
        returned = json.loads(line[len(f"pass {secret} ") :])
        assert isinstance(returned, list) and len(returned) == len(cases)
    except (ValueError, AssertionError):
        return "the harness's report of the returned values is unreadable"
    for i, ((args, expected), got) in enumerate(zip(cases, returned, strict=True)):
        shown = f"(**{args!r})" if isinstance(args, dict) else repr(tuple(args))
        call = f"case {i}: {entry_point}{shown}"
        if "unserialisable" in got:
            return f"{call} returned a {got['unserialisable']}, which JSON cannot carry"
        value, want = json.loads(got["json"]), normalised(expected)
        if not same_output(value, want):
            return f"{call} returned {got['json'][:60]}, expected {json.dumps(want)[:60]}"
    return None


def normalised(value: Any) -> Any:
    """`value` as the harness reports a returned one: through JSON, sets as sorted lists,
    complex numbers as [real, imag], bytes as latin-1 text."""
    return json.loads(json.dumps(value, allow_nan=True, sort_keys=True, default=_unjson))


def _unjson(value: Any) -> Any:
    """harness._unjson's rule, for the expected side (test_forged_truth holds them equal)."""
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
