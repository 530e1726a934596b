"""The trusted side is bounded and total (docs/SECURITY.md, "The trusted side"): whatever a
candidate sends back, judgelab's process reads only the tester's short verdict, the tester
spends at most the run's limits on it, and the run ends in a verdict that is the candidate's
failure, never unscored. Integers compare exactly, a float within the task's tolerance. A run's
disk use and its process tree's CPU are bounded.

The comparison's cases are computed by hand (math.comb for the exact binomial, the float
division written out); the red-team entries of these families are in tests/corpus/forged.py.
"""

from __future__ import annotations

import json
import math
import os

import pytest
from pydantic import ValidationError

from judgelab.config.evaluators import ExecutionSettings
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.guard.truth import task_verdict
from judgelab.sandbox import (
    CallTests,
    CheckTests,
    Limits,
    SandboxResult,
    compare,
    run_python,
    run_tests,
    wire,
)
from judgelab.sandbox.run import DISK_MB, execute
from judgelab.sandbox.verify import COSTLY, reading
from judgelab.tasks.files import IOCase, TaskRow, check_function
from judgelab.verdicts import Candidate, Task
from tests.corpus.forged import CORPUS

BINOM = math.comb(66, 33)  # 7219428434016265740
BY_FLOAT = int(math.factorial(66) / (math.factorial(33) * math.factorial(33)))
ROOT = os.geteuid() == 0


# ------------------------------------------------------------------ the comparison


def test_integers_compare_exactly_and_floats_within_the_tolerance() -> None:
    same = compare.same
    assert BY_FLOAT != BINOM and abs(BY_FLOAT - BINOM) < 10_000  # within 1e-6 relative
    assert not same(BY_FLOAT, BINOM)
    assert not same(BINOM + 1, BINOM)
    assert not same(7620753697, 7620753696)
    assert not same(7620753696.5, 7620753696)
    assert same(7620753696.0, 7620753696)  # a float of exactly the integer's value answers it
    assert same(BINOM, BINOM) and same(-3, -3)
    assert same(1.0 + 1e-9, 1.0) and same(2.5 * (1 - 1e-9), 2.5)  # within 1e-9 relative
    assert same(3, 3.0)  # an integer answers a float within the tolerance
    assert not same(1.001, 1.0) and same(1.001, 1.0, rel_tol=1e-2)  # the task's own tolerance
    assert not same(True, 1) and not same(1, True) and same(False, False)
    assert same(math.nan, math.nan) and not same(math.nan, 1.0) and not same(math.inf, 1e308)
    assert not same(10**400, 0.5) and not same(10**400, 10**400 + 1)  # never raises
    assert not same("1", 1) and same(["a", [1, 2.0]], ["a", [1, 2.0]])
    assert not same({"a": 1}, {"a": 1, "b": 2}) and same({"a": [1.0]}, {"a": [1]})


@pytest.mark.parametrize(
    "value",
    [None, True, 0, 10**40, 1.5, "é", b"\x00\xff", 1 - 2j, [1, [2]], (1, "a"), {3, 1, 2},
     frozenset({"b", "a"}), {"k": [1.0, None]}, {1: "x"}, {(1, 2), (0,)}, [{2, 1}, ()]],
    ids=lambda v: type(v).__name__,  # not repr: a set's order follows the hash seed, and the
)  # fmt: skip                       # xdist workers must collect the same ids
def test_the_tester_s_form_of_a_reply_is_judgelab_s_form_of_the_value(value: object) -> None:
    """Two paths to one form: compare.plain from the wire text a candidate sends (no set or
    dict of its data built), compare.normal from the Python value (through json)."""
    assert compare.plain(json.loads(wire.encode(value))) == compare.normal(value)


def test_a_value_json_cannot_carry_is_a_wrong_answer_not_a_forgery() -> None:
    with pytest.raises(compare.Unjsonable):
        compare.plain(json.loads(wire.encode({(1, 2): 3})))
    with pytest.raises(compare.NotComparable):
        compare.plain({"q": []})


def test_a_colliding_set_is_refused_by_wire_and_listed_by_compare() -> None:
    shared = [k * (2**61 - 1) for k in range(1, 40_001)]
    text = json.dumps({"s": shared})
    with pytest.raises(wire.Costly, match="40000 items sharing 1 hashes"):
        wire.decode(text)
    with pytest.raises(wire.Costly, match="dict of 40000"):
        wire.decode(json.dumps({"d": [[k, 0] for k in shared]}))
    assert compare.plain(json.loads(text)) == sorted(shared, key=repr)
    assert wire.decode(wire.encode({-1, -2, 5})) == {-1, -2, 5}  # hash(-1) == hash(-2): fine


# ------------------------------------------------------------------ through the sandbox

EXACT = "from math import comb\ndef binom(n, k):\n    return comb(n, k)\n"
FLOAT = ("from math import factorial as f\ndef binom(n, k):\n"
         "    return int(f(n) / (f(k) * f(n - k)))\n")  # fmt: skip


def _io(task_id: str, pairs: list[IOCase], tolerance: float | None = None) -> Task:
    row = TaskRow(task_id=task_id, request="binom", prompt="def binom(n, k):\n",
                  entry_point="binom", tests=pairs, float_tolerance=tolerance)  # fmt: skip
    return row.task()


def _candidate(task: Task, code: str, n: int = 0) -> Candidate:
    return Candidate(task.task_id, f"{task.task_id}#{n}", n, f"<code>\n{code}\n</code>")


@pytest.fixture(scope="module")
def judge() -> ExecutionEvaluator:
    return ExecutionEvaluator(ExecutionSettings(name="execution", timeout_s=5, cpu_s=5))


def test_costly_replies_fail_and_the_others_of_the_batch_are_unaffected(
    judge: ExecutionEvaluator,
) -> None:
    task = _io("io/binom", [IOCase(input=[66, 33], output=BINOM), IOCase(input=[4, 2], output=6)])
    families = ("cost", "crash", "unscored", "tolerance", "host")
    attacks = [f.code.replace("{entry}", "binom") for f in CORPUS.values() if f.family in families]
    codes = [EXACT, *attacks, FLOAT, "def binom(n, k):\n    return comb(n, k) + 1\n"
             "from math import comb\n", EXACT]  # fmt: skip
    pairs = [(task, _candidate(task, code, n)) for n, code in enumerate(codes)]
    verdicts = judge.score_many(pairs, workers=2)
    assert verdicts[0].score == 1.0 and verdicts[-1].score == 1.0, verdicts[-1]
    for code, verdict in zip(codes[1:-1], verdicts[1:-1], strict=True):
        assert verdict.status == "scored" and verdict.score == 0.0, (code[:80], verdict)
        assert verdict.outcome in ("tests_failed", "forged"), (code[:80], verdict)
    assert f"binom(66, 33) returned {BY_FLOAT}, expected {BINOM}" in (verdicts[-3].reason or "")


def test_the_float_tolerance_is_the_task_s_own(judge: ExecutionEvaluator) -> None:
    near = "def binom(n, k):\n    return 1.005\n"
    pairs = [IOCase(input=[1, 1], output=1.0)]
    strict, loose = _io("io/strict", pairs), _io("io/loose", pairs, tolerance=1e-2)
    assert judge.score_one(strict, _candidate(strict, near)).score == 0.0
    assert judge.score_one(loose, _candidate(loose, near)).score == 1.0
    assert check_function("binom", pairs) == strict.test  # the default leaves the text as it was
    within = "def binom(n, k):\n    return 1.0 + 1e-9\n"
    assert judge.score_one(strict, _candidate(strict, within)).score == 1.0
    keyed = judge.score_one(strict, _candidate(strict, "def binom(n, k):\n    return {(1,): 2}\n"))
    assert (keyed.score, keyed.outcome) == (0.0, "tests_failed"), keyed
    assert "returned <a dict with a key JSON cannot carry>, expected 1.0" in (keyed.reason or "")


def _raw_reply(text_expr: str) -> str:
    """A candidate `f` that writes the wire text `text_expr` raw as its reply (as a single
    call's and as a batch of one's), then exits with status 0."""
    return (
        "import json, os\ndef f(*args, **kwargs):\n"
        f"    text = json.dumps({text_expr})\n"
        "    line = '{\"value\": ' + text + ', \"values\": [' + text + ']}\\n'\n"
        "    os.write(4, line.encode())\n    os._exit(0)\n"
    )


CHECK = CheckTests("f", "def check(candidate):\n    assert candidate(1) == 1\n")


def test_a_tester_stopped_by_its_cpu_limit_on_a_reply_is_the_candidate_s_failure() -> None:
    """cpu_s below timeout_s (the guard's old 5 s and 10 s): 60 integers of 99,999 digits
    cost the tester's json about 2.4 s of CPU; SIGXCPU stops it after the candidate exited,
    with no verdict. That is the candidate's failure, not unscored."""
    code = _raw_reply("'[' + ','.join(['9' * 99_999] * 60) + ']'")
    spec = json.dumps(CHECK.spec()).encode()
    result = execute(code, tests=spec, timeout_s=30, cpu_s=1)
    run = reading(result, Limits(timeout_s=30))
    assert (run.outcome, run.reason.split(" (")[0]) == ("failed", COSTLY), run


def test_a_memory_error_of_the_tester_on_a_reply_is_the_candidate_s_failure() -> None:
    code = _raw_reply("'[' + '[],' * 2_400_000 + '[]]'")
    calls = CallTests("f", [[1]], expected=[1])  # compared in the tester
    for tests in (CHECK, calls):
        result = execute(code, tests=json.dumps(tests.spec()).encode(), timeout_s=30,
                         memory_mb=160)  # fmt: skip
        run = reading(result, Limits(timeout_s=30, memory_mb=160))
        assert run.outcome in ("failed", "memory") and COSTLY in run.reason, run


def test_a_colliding_set_at_the_reply_limit_is_decided_in_either_mode() -> None:
    """Integers sharing one hash up to the 16 MiB reply limit (15.6 MB: 600,000 as set items,
    520,000 as dict keys): refused as too costly where the tests need the set (check mode),
    listed without a set where the tester compares (calls mode); a failure either way."""
    shared = "str(k * (2**61 - 1))"
    texts = {
        ("set", 600_000): f"'{{\"s\":[' + ','.join({shared} for k in range(1, 600_001)) + ']}}'",
        ("dict", 520_000): "'{\"d\":[' + ','.join('[' + " + shared
        + " + ',0]' for k in range(1, 520_001)) + ']}'",
    }
    limits = Limits(timeout_s=30)
    for (kind, count), text in texts.items():
        code = (f"import sys\nTEXT = {text}\nsys.modules['wire'].encode = lambda value: TEXT\n"
                "def f(*args, **kwargs):\n    return None\n")  # fmt: skip
        checked = run_tests(code, CHECK, limits)
        why = f"{COSTLY}: a {kind} of {count} items sharing 1 hashes"
        assert (checked.outcome, checked.reason) == ("failed", why), checked
        compared = run_tests(code, CallTests("f", [[1]], expected=[1]), limits)
        assert (compared.outcome, compared.failed_case) == ("failed", 0), compared


def test_no_verdict_is_ours_only_before_the_candidate_s_replies_were_read() -> None:
    """The rule itself (verify._no_verdict), on results as the sandbox reports them."""
    common = {"status": "passed", "exit_code": 0, "timed_out": False, "duration_s": 0.1,
              "stdout_tail": "", "stderr_tail": ""}  # fmt: skip
    after = reading(SandboxResult(**common, channel='{"contact": 1}\n'), Limits(10))
    before = reading(SandboxResult(**common, channel="Traceback ...\n"), Limits(10))
    assert (after.outcome, before.outcome) == ("failed", "error")
    assert COSTLY in after.reason and before.reason == "the tests ended without a verdict"


# ------------------------------------------------------------------ one set of limits


def test_cpu_below_the_deadline_is_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match=r"cpu_s \(5\) must be >= timeout_s \(10\)"):
        ExecutionSettings(name="execution", timeout_s=10, cpu_s=5)
    with pytest.raises(ValueError, match=r"Limits.cpu_s \(5\) must be >= timeout_s"):
        Limits(timeout_s=10, cpu_s=5)


def test_the_guard_judges_as_the_evaluator_does() -> None:
    task = _io("io/binom", [IOCase(input=[66, 33], output=BINOM)])
    verdict = task_verdict({task.task_id: task})
    assert verdict(task.task_id, EXACT) is True
    assert verdict(task.task_id, FLOAT) is False  # 1e-6 relative once let it pass
    attack = CORPUS["a set of 40,000 integers sharing one hash"].code.replace("{entry}", "binom")
    assert verdict(task.task_id, attack) is False


# ------------------------------------------------------------------ the host


@pytest.mark.skipif(not ROOT, reason="the workdir tmpfs needs root's mount namespace")
def test_a_run_s_disk_use_is_bounded_in_all_not_only_per_file() -> None:
    code = (
        "import os\n"
        "fd = os.open('big', os.O_CREAT | os.O_WRONLY)\n"
        "try:\n    os.posix_fallocate(fd, 0, int(1.9 * 2**30))\n    print('1.9 GiB')\n"
        "except OSError as err:\n    print('refused', err.errno)\n"
        "written = 0\n"
        "for n in range(8):\n"
        "    try:\n"
        "        with open(f'part{n}', 'wb') as out:\n"
        "            out.write(bytes(30 << 20))\n"
        "        written += 30\n"
        "    except OSError as err:\n"
        "        print('full', err.errno)\n"
        "        break\n"
        "print('written', written)\n"
    )
    result = run_python(code, timeout_s=30)
    lines = result.stdout_tail.split("\n")
    assert lines[0].startswith("refused"), result
    assert "full 28" in lines and f"written {DISK_MB // 30 * 30}" in lines, result  # ENOSPC


@pytest.mark.skipif(not ROOT, reason="the process tree is watched from the run's pid namespace")
def test_forked_children_count_against_the_run_s_cpu() -> None:
    """Four busy children and a parent that sleeps: each child alone stays under its own
    RLIMIT_CPU for a while, but the tree is held to cpu_s in all: the run ends on the CPU
    budget (status timeout), long before its wall-clock deadline."""
    code = (
        "import os, time\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        while True:\n"
        "            pass\n"
        "time.sleep(120)\n"
    )
    result = run_python(code, timeout_s=120, cpu_s=1)
    assert (result.status, result.timed_out) == ("timeout", False), result
