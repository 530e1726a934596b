"""The truth's invariant (docs/SECURITY.md): the tests, their expected values and the verdict
never enter the candidate's process, and only plain data comes back out of it.

- The candidate's process searches all of its own memory, and every process and file it can
  open, for the tests' text and an expected value: it finds neither.
- The wire format (judgelab.sandbox.wire) rebuilds exact built-in types only, checked against
  an independent implementation (`ast.literal_eval` of the value's repr) and against hostile
  text; what it refuses is named.
- The tester's own failures (tests that cannot run, arguments that cannot cross) are ours:
  "error", never a verdict on the code; a failure of the tester on the candidate's replies is
  the candidate's (tests/unit/test_trusted_side.py).
"""

from __future__ import annotations

import ast
import json
import math
import uuid
from collections import OrderedDict, namedtuple
from enum import IntEnum

import pytest

from judgelab.sandbox import CallTests, CheckTests, Limits, run_tests, wire
from judgelab.tasks.files import IOCase, check_function
from judgelab.tasks.testing import truth_tests
from judgelab.verdicts import Task

LIMITS = Limits(timeout_s=20, cpu_s=20)

# The candidate: it answers, then searches everything it can reach for the secret words.
_SEARCH = r'''
import os, uuid
# Each word arrives as two halves, and is never joined here: found, it was put there by
# something else. CONTROL is made whole, here, and must be found (the search works).
CONTROL = ("control-" + uuid.uuid4().hex).encode()
WORDS = [(a.encode(), b.encode()) for a, b in WORDS_HERE]
WORDS.append((CONTROL[:8], CONTROL[8:]))
def _holds(chunk, word):
    head, tail = word
    at = chunk.find(head)
    while at >= 0:
        if chunk[at + len(head) : at + len(head) + len(tail)] == tail:
            return True
        at = chunk.find(head, at + 1)
    return False
def _name(word):
    return word[0].decode() + "|" + word[1].decode()
def _memory_of(pid):
    """What `pid`'s memory holds of WORDS: through /proc/<pid>/mem, or for this process (which
    its change of uid made non-dumpable, so that /proc/self/mem is closed to it too) by
    reading each readable mapping in place."""
    found = set()
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb") if pid != "self" else None
    except OSError:
        return found, False
    import ctypes
    for line in maps:
        parts = line.split()
        span, perms = parts[:2]
        name = parts[5] if len(parts) > 5 else ""
        if "r" not in perms or name.startswith(("[vvar", "[vsyscall", "/dev/")):
            continue
        start, end = (int(x, 16) for x in span.split("-"))
        try:
            if mem is None:
                chunk = ctypes.string_at(start, end - start)
            else:
                mem.seek(start)
                chunk = mem.read(end - start)
        except (OSError, ValueError, OverflowError, MemoryError):
            continue
        found |= {_name(w) for w in WORDS if _holds(chunk, w)}
    return found, True
def _files():
    found = set()
    for top, dirs, files in os.walk("/"):
        if top.startswith(("/proc", "/sys", "/dev", "/tmp/sandbox")):
            dirs[:] = []
            continue
        for name in files:
            try:
                with open(os.path.join(top, name), "rb") as handle:
                    data = handle.read(1 << 20)
            except OSError:
                continue
            found |= {_name(w) for w in WORDS if _holds(data, w)}
    return found
def f(x):
    mine, _ = _memory_of("self")
    others = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            got, opened = _memory_of(pid)
            others[pid] = (sorted(got), opened)
    print("MINE", sorted(mine))
    print("OTHERS", others)
    print("FILES", sorted(_files()))
    return x + 1
'''


def _search(words: list[str]) -> str:
    return _SEARCH.replace("WORDS_HERE", repr([(w[:8], w[8:]) for w in words]))


def test_the_tests_and_their_expected_values_never_enter_the_candidate_s_process() -> None:
    secret = f"expected-{uuid.uuid4().hex}"
    helper = f"helper_{uuid.uuid4().hex}"
    test = (
        f"def {helper}():\n    return {secret!r}\n"
        "def check(candidate):\n    assert candidate(1) == 2\n"
        f"    assert {helper}() == {secret!r}\n"
    )
    run = run_tests(_search([secret, helper]), CheckTests("f", test, prelude="import math"), LIMITS)
    assert run.outcome == "passed", (run.reason, run.detail)
    out = run.result.stdout_tail if run.result else ""
    mine = ast.literal_eval(out.split("MINE ", 1)[1].splitlines()[0])
    assert [w[:8] for w in mine] == ["control-"], out  # found its own word, no other
    assert "FILES []" in out, out
    others = ast.literal_eval(out.split("OTHERS ", 1)[1].splitlines()[0])
    assert all(found == [] for found, _ in others.values()), others
    # where the sandbox has namespaces, the code sees no process of the run but its own kind
    # (pid 1, the supervisor, and the tester: both closed to it)
    assert not any(opened for _, opened in others.values()), others


def test_expected_values_of_input_output_tests_never_enter_the_candidate_s_process() -> None:
    """A task of input/output pairs becomes calls with their expected values, which only the
    trusted tester holds (it compares them there): the candidate's process, searching all it
    can reach while the tester waits with them, finds none; only the verdict comes back."""
    secret = uuid.uuid4().int % 10**15
    pairs = [IOCase(input=[1], output=secret), IOCase(input={"x": 2}, output=[secret, "x"])]
    task = Task("io", "files", "def f(x):\n", "f", check_function("f", pairs), request="f")
    tests = truth_tests(task)
    assert isinstance(tests, CallTests) and tests.expected == [secret, [secret, "x"]]
    assert str(secret) not in json.dumps(tests.spec()["batch"])
    run = run_tests(_search([str(secret)]), tests, LIMITS)
    assert (run.outcome, run.failed_case, run.got, run.values) == ("failed", 0, "2", None), run
    out = run.result.stdout_tail if run.result else ""
    assert out.count("MINE ['control-|") == 2 and out.count("FILES []") == 2, out


def test_tests_that_cannot_run_are_our_error_not_the_code_s() -> None:
    code = "def f(x):\n    return x\n"
    broken = run_tests(code, CheckTests("f", "def check(candidate):\n    assert (\n"), LIMITS)
    assert broken.outcome == "error" and "tests do not run" in broken.reason
    uncrossable = CheckTests("f", "def check(candidate):\n    assert candidate(len) == len\n")
    run = run_tests(code, uncrossable, LIMITS)
    assert run.outcome == "error" and "cannot cross" in run.reason, run


# ------------------------------------------------------------------ the wire format

Point = namedtuple("Point", "x y")


class Colour(IntEnum):
    RED = 1


PLAIN = [
    None, True, False, 0, -7, 10**40, 1.5, -0.0, 1e300, "", "é\n\x00", b"\x00\xff", 1 - 2j,
    [], [1, [2, [3]]], (), (1, "a"), {1, 2}, frozenset({"a"}), {}, {"k": [1.0, None]},
    {(1, 2): {3: frozenset({4})}}, [(), [], {}],
]  # fmt: skip


@pytest.mark.parametrize("value", PLAIN, ids=repr)
def test_plain_values_round_trip_as_literal_eval_rebuilds_them(value: object) -> None:
    """An independent reference: Python's own literal parser on the value's repr."""
    back = wire.decode(wire.encode(value))
    names = {"__builtins__": {}, "set": set, "frozenset": frozenset}
    reference = eval(repr(value), names)  # noqa: S307 - our own literals, read back
    assert back == reference and _types(back) == _types(reference)


def test_floats_that_have_no_literal_keep_their_value() -> None:
    nan, inf = wire.decode(wire.encode(float("nan"))), wire.decode(wire.encode(-math.inf))
    assert math.isnan(nan) and inf == -math.inf
    assert type(wire.decode(wire.encode(1.0))) is float and type(wire.decode("1")) is int


def test_subclasses_of_built_ins_cross_as_the_data_they_hold() -> None:
    assert wire.decode(wire.encode(Point(1, 2))) == (1, 2)
    assert type(wire.decode(wire.encode(Point(1, 2)))) is tuple
    assert wire.decode(wire.encode(OrderedDict(a=1))) == {"a": 1}
    assert type(wire.decode(wire.encode(Colour.RED))) is int


def test_what_is_not_plain_data_is_refused_with_its_class() -> None:
    class Anything(int):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = int.__hash__

    for value, named in ((object(), "object"), (Anything(1), "Anything"), (len, "builtin"),
                         ([1, {2: iter([])}], "list_iterator")):  # fmt: skip
        with pytest.raises(wire.NotPlain, match=named):
            wire.encode(value)
    deep: list[object] = []
    for _ in range(wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(wire.NotPlain, match="deeper"):
        wire.encode(deep)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        '{"x": 1}',
        '{"t": 1}',
        '{"s": [[1]]}',
        '{"d": [[1]]}',
        '{"d": [1]}',
        '{"b": "zz"}',
        '{"c": [1]}',
        '{"c": ["a", 1]}',
        '{"t": [1], "s": [2]}',
        "[" * 100_000,
        "1" * (wire.MAX_INT_DIGITS + 10),
    ],  # fmt: skip
)
def test_hostile_text_is_malformed_never_a_value(text: str) -> None:
    with pytest.raises(wire.Malformed):
        wire.decode(text)


def _types(value: object) -> object:
    """The value's shape as exact types, containers included."""
    if isinstance(value, dict):
        return (dict, [(_types(k), _types(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value), [_types(v) for v in value])
    if isinstance(value, set | frozenset):
        return (type(value), sorted(repr(_types(v)) for v in value))
    return type(value)
