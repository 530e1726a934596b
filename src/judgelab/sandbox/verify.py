"""The truth: a candidate's code against tests it cannot reach. `run_tests` is the one entry.

The code (main.py: the task's own preamble and the candidate's answer) is imported in the
sandbox by the candidate's runner (candidate.py), which only answers calls. The tests run in
the trusted tester (tester.py), a process of its own under another uid: they arrive there on a
pipe from this process, call the candidate through a forwarder, and get back what each call
returned rebuilt from plain data (wire.py). What never crosses into the candidate's process:
the test code, an expected value, the verdict or a way to write it. What crosses back: plain
values, the names of built-in exceptions and their text. So a pass is produced only by calls
that returned the right values; docs/SECURITY.md states the invariant and its limits.

Two kinds of tests:
- `CheckTests`: a HumanEval-style `check(candidate)` function and the prompt's own helpers it
  uses, run as written (random inputs and all);
- `CallTests`: a list of calls (argument lists or keyword dicts) with their expected values,
  which the tester compares (compare.py) and which never enter the candidate's process; or,
  without expected values (runs of judgelab's own reference), what each returned comes back
  in `TestRun.values`.

Whatever a reply holds, this process reads only the tester's short verdict (its channel's last
VERDICT_CHANNEL bytes), and a tester that fails or dies once it has read from the candidate
is the candidate's failure ("a reply too costly to rebuild"), never a sandbox error
(docs/SECURITY.md, "The trusted side").

Every run ends in one `TestOutcome`, with a reason a person can read.
"""

from __future__ import annotations

import json
import re
import signal
from dataclasses import dataclass, field
from typing import Any, Literal

from judgelab.sandbox import compare, wire
from judgelab.sandbox.run import SandboxResult, execute

TestOutcome = Literal[
    "passed",  # every test ran to its end (CallTests: every call returned; see values)
    "failed",  # a test failed, or the code raised (on import or in a call)
    "forged",  # a reply that is not plain data, or a write to the reply pipe that is no reply
    "exited",  # the code's process ended before it answered
    "timeout",  # the wall-clock deadline or the CPU limit
    "memory",  # the memory limit
    "killed",  # another signal
    "not_parsed",  # the code does not compile: no test ran
    "error",  # the sandbox or the tests themselves failed: no verdict on the code
]
_COMPILE_ERRORS = ("SyntaxError", "IndentationError", "TabError")
# CPython reports a script it cannot compile as the place (`File ".../main.py", line N`) with
# no traceback; a SyntaxError raised while the code runs (exec, compile, an import) is not that.
_NOT_COMPILED = re.compile(r'^\s*File "(?:[^"]*/)?main\.py", line \d+$', re.MULTILINE)
_TRACEBACK = "Traceback (most recent call last):"
# What judgelab keeps of the tester's channel: a verdict of a run that compares in the tester is
# one short line (its fields are cut to DETAIL_CHARS and less), so 1 MiB is ample and is all
# this process ever parses of it; a run of judgelab's own reference sends its values, as
# written, and may take the reply limit three times over (JSON escapes).
VERDICT_CHANNEL = 1 << 20
VALUES_CHANNEL = 3 * (16 << 20) + (1 << 20)
COSTLY = "a reply too costly to rebuild"
CONTACT = json.dumps({"contact": 1})  # the tester's line: it has read from the candidate


@dataclass(frozen=True)
class Limits:
    """Per process (the candidate's and the tester's): wall clock for the run, CPU seconds,
    address space; and how much of the code's stdout and stderr to keep. `cpu_s` is at least
    `timeout_s` (unset: equal): the tester runs under it too, and a tester stopped by its CPU
    limit before the deadline would leave a run without a verdict of its own."""

    timeout_s: float
    cpu_s: float | None = None
    memory_mb: int = 1024
    output_limit: int = 64_000

    def __post_init__(self) -> None:
        if self.cpu_s is not None and self.cpu_s < self.timeout_s:
            raise ValueError(f"Limits.cpu_s ({self.cpu_s:g}) must be >= timeout_s "
                             f"({self.timeout_s:g}): the tester runs under it")  # fmt: skip


@dataclass(frozen=True)
class CheckTests:
    """A `check(candidate)` function (`test`) calling `entry_point`, with the prompt's own
    helpers (`prelude`) defined beside it on the trusted side."""

    entry_point: str
    test: str
    prelude: str = ""

    def spec(self) -> dict[str, Any]:
        return {"mode": "check", "entry_point": self.entry_point, "test": self.test,
                "prelude": self.prelude}  # fmt: skip


@dataclass(frozen=True)
class CallTests:
    """Calls of `entry_point`: each case a list of positional or a dict of keyword arguments.
    With `expected` (one value per case: a candidate's run), the tester compares what each
    call returned (compare.same, within `rel_tol`/`abs_tol` where a float is expected) and
    only its verdict comes back; without (a run of judgelab's own reference), the values come
    back in `TestRun.values`."""

    entry_point: str
    cases: list[Any]
    expected: list[Any] | None = None
    rel_tol: float = compare.REL_TOL
    abs_tol: float = compare.ABS_TOL

    def spec(self) -> dict[str, Any]:
        batch = [
            [wire.encode(case), wire.encode({})] if isinstance(case, list)
            else [wire.encode([]), wire.encode(dict(case))]
            for case in self.cases
        ]  # fmt: skip
        spec = {"mode": "calls", "entry_point": self.entry_point, "batch": batch}
        if self.expected is not None:
            if len(self.expected) != len(self.cases):
                raise ValueError(f"CallTests: {len(self.expected)} expected values for "
                                 f"{len(self.cases)} cases")  # fmt: skip
            spec |= {"expected": [compare.normal(value) for value in self.expected],
                     "rel_tol": self.rel_tol, "abs_tol": self.abs_tol}  # fmt: skip
        return spec


@dataclass(frozen=True)
class TestRun:
    """What the tests said of the code."""

    outcome: TestOutcome
    reason: str
    detail: str = ""  # the tests' traceback, then the code's stderr tail
    values: list[Any] | None = None  # CallTests without expected: what each call returned
    failed_case: int | None = None  # CallTests: the call that raised, or returned a wrong value
    got: str | None = None  # CallTests with expected: the wrong value, as JSON, cut short
    calls: int = 0  # calls the tests made
    duration_s: float = 0.0
    result: SandboxResult | None = field(default=None, repr=False)


def run_tests(code: str, tests: CheckTests | CallTests, limits: Limits) -> TestRun:
    """Run `tests` against `code` (see the module docstring); never raises for what the code
    does, and never runs it outside the sandbox."""
    spec = json.dumps(tests.spec()).encode()
    values = isinstance(tests, CallTests) and tests.expected is None
    result = execute(code, tests=spec, timeout_s=limits.timeout_s, cpu_s=limits.cpu_s,
                     memory_mb=limits.memory_mb, output_limit=limits.output_limit,
                     channel_limit=VALUES_CHANNEL if values else VERDICT_CHANNEL)  # fmt: skip
    return reading(result, limits)


def reading(result: SandboxResult, limits: Limits) -> TestRun:
    """The TestRun a sandbox result stands for: the tester's verdict, read beside how the
    code's process ended."""
    said = _verdict(result.channel)
    stderr = result.stderr_tail
    common: dict[str, Any] = {"duration_s": result.duration_s, "result": result}
    if result.status == "error":
        return TestRun("error", stderr[:200] or "sandbox error", stderr, **common)
    kind = said.get("verdict") if said else None
    common["calls"] = int(said.get("calls") or 0) if said else 0
    detail = _detail(str(said.get("detail") or "") if said else "", stderr)
    ended = _ending(result, limits) if kind in (None, "exited") else None
    # After "exited", a SIGKILL may be the supervisor's (it ends the code once the tester has
    # its verdict); any other signal, and every limit, is the code's own ending.
    own = ended is not None and not (kind == "exited" and ended[1] == "killed by SIGKILL")
    # A tester stopped on a reply (it read from the candidate: CONTACT) takes the code down with
    # it (a SIGKILL from the supervisor): that is the reply's cost, said as such below.
    contact = CONTACT in result.channel.splitlines()
    if ended is not None and own and not (kind is None and ended[0] == "killed" and contact):
        return TestRun(ended[0], ended[1], detail, **common)
    if kind is None:
        return _no_verdict(result, detail, common)
    why = str(said.get("why") or "")
    if kind == "passed":
        return TestRun("passed", "tests passed", detail, **common)
    if kind == "wrong":  # compared in the tester: the first value that differs
        return TestRun("failed", "a call returned a wrong value", detail,
                       failed_case=int(said.get("case") or 0), got=str(said.get("got"))[:80],
                       **common)  # fmt: skip
    if kind == "returned":
        return _returned(said["values"], detail, common)
    if kind == "forged":
        return TestRun("forged", why, detail, **common)
    if kind == "exited":
        # A SIGKILL may be the code's own or the supervisor's: either way the code stopped
        # answering first.
        status = result.exit_code
        if status == 0:
            return TestRun("forged", "exited with status 0 before answering", detail, **common)
        how = f"killed by {_signal_name(status)}" if (status or 0) < 0 else f"status {status}"
        return TestRun("exited", f"exited before answering ({how})", detail, **common)
    if kind == "error":
        return TestRun("error", why, detail, **common)
    if why.startswith("MemoryError"):
        return TestRun("memory", f"memory limit of {limits.memory_mb} MB exceeded", detail,
                       **common)  # fmt: skip
    if kind == "import_failed" and _not_compiled(why, stderr):
        return TestRun("not_parsed", _last_line(stderr) or why, stderr, **common)
    case = said.get("case")
    partial = None
    if case is not None:  # what the calls before the one that raised returned
        try:
            partial = [wire.decode(text) for text in said.get("values") or []]
        except (wire.Malformed, wire.Costly, MemoryError, RecursionError):
            partial = None
    return TestRun("failed", why or "a test failed", detail, values=partial,
                   failed_case=None if case is None else int(case), **common)  # fmt: skip


def _returned(texts: list[str], detail: str, common: dict[str, Any]) -> TestRun:
    """The values a run of judgelab's own reference returned (CallTests without expected),
    rebuilt here (only such runs send values on)."""
    try:
        values = [wire.decode(text) for text in texts]
    except wire.Malformed as err:
        return TestRun("forged", f"a reply that is not plain data: {err}", detail, **common)
    except (wire.Costly, MemoryError, RecursionError):
        return TestRun("failed", COSTLY, detail, **common)
    return TestRun("passed", "every call returned", detail, values=values, **common)


def _no_verdict(result: SandboxResult, detail: str, common: dict[str, Any]) -> TestRun:
    """A run whose tester left no verdict. Once the candidate's replies were being read (the
    tester's "contact" line), they may be the cause: a tester stopped by its own limits while
    rebuilding one (SIGXCPU, SIGKILL), so the candidate's failure, never unscored. Before, the
    tests themselves did not run: our failure."""
    if CONTACT in result.channel.splitlines():
        why = f"{COSTLY} (the tester stopped without a verdict)"
        return TestRun("failed", why, (result.channel[-300:] + "\n" + detail).strip(), **common)
    why = "the tests ended without a verdict"
    return TestRun("error", why, (result.channel[-300:] + "\n" + detail).strip(), **common)


def _verdict(channel: str) -> dict[str, Any] | None:
    """The tester's verdict: the last line of its channel that is one (its own crash, if
    any, is the text before)."""
    for line in reversed(channel.splitlines()):
        try:
            said = json.loads(line)
        except ValueError:
            continue
        if isinstance(said, dict) and "verdict" in said:
            return said
    return None


def _ending(result: SandboxResult, limits: Limits) -> tuple[TestOutcome, str] | None:
    """How a run ended that the tester could not finish, when a limit ended it."""
    if result.status == "timeout":
        if result.timed_out:
            return "timeout", f"timeout after {limits.timeout_s:g}s"
        cpu = limits.cpu_s if limits.cpu_s is not None else limits.timeout_s
        return "timeout", f"cpu limit of {cpu:g}s exceeded"
    if result.status == "memory":
        return "memory", f"memory limit of {limits.memory_mb} MB exceeded"
    if result.status == "killed" and result.exit_code != -signal.SIGKILL:
        return "killed", f"killed by {_signal_name(result.exit_code)}"
    if result.status == "killed":
        return "killed", "killed by SIGKILL"
    return None


def _not_compiled(why: str, stderr: str) -> bool:
    return (
        why.startswith(_COMPILE_ERRORS)
        and _TRACEBACK not in stderr
        and _NOT_COMPILED.search(stderr) is not None
    )


def _detail(tests: str, stderr: str) -> str:
    return "\n".join(part for part in (stderr.strip(), tests.strip()) if part)


def _last_line(text: str) -> str:
    return next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")


def _signal_name(exit_code: int | None) -> str:
    try:
        return signal.Signals(-(exit_code or 0)).name
    except ValueError:
        return f"signal {-(exit_code or 0)}"
