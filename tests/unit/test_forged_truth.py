"""Execution truth that a policy cannot forge: every candidate of the red-team corpus
(tests/corpus/forged.py) fails, with an outcome and reason it may have, against a HumanEval
task (its own `test`) and against a task of input/output pairs (the tester compares, in the
sandbox, and only its verdict comes back). The honest answers beside them still pass, so a
harness that failed everything would fail here too."""

from __future__ import annotations

import pytest

from judgelab.config import HumanEvalSettings
from judgelab.config.evaluators import ExecutionSettings
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.sandbox import CallTests, Limits, run_tests
from judgelab.tasks.files import IOCase, check_function, io_cases
from judgelab.tasks.humaneval import load_humaneval
from judgelab.verdicts import Candidate, Task, Verdict
from tests.corpus.forged import CORPUS

PAIRS = [IOCase(input=[1, 2], output=3), IOCase(input={"a": 0.1, "b": 0.2}, output=0.3)]
IO_TASK = Task(
    task_id="io/add",
    source="files",
    request="Write add(a, b).",
    prompt="def add(a, b):\n",
    entry_point="add",
    test=check_function("add", PAIRS),
)
HONEST = {"io/add": "def add(a, b):\n    return a + b\n"}


@pytest.fixture(scope="module")
def judge() -> ExecutionEvaluator:
    return ExecutionEvaluator(ExecutionSettings(name="execution", timeout_s=5, cpu_s=5))


@pytest.fixture(scope="module")
def tasks() -> dict[str, Task]:
    (humaneval,) = load_humaneval(HumanEvalSettings(ids=["HumanEval/0"]))
    assert humaneval.canonical_solution is not None
    HONEST[humaneval.task_id] = humaneval.prompt + humaneval.canonical_solution
    return {humaneval.task_id: humaneval, IO_TASK.task_id: IO_TASK}


def run(judge: ExecutionEvaluator, task: Task, code: str) -> Verdict:
    completion = f"<code>\n{code}\n</code>"
    return judge.score_one(task, Candidate(task.task_id, f"{task.task_id}#0", 0, completion))


@pytest.mark.parametrize("kind", ["HumanEval/0", "io/add"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_each_forgery_fails_with_its_reason(
    judge: ExecutionEvaluator, tasks: dict[str, Task], kind: str, name: str
) -> None:
    forgery = CORPUS[name]
    task = tasks[kind]
    assert task.entry_point is not None
    verdict = run(judge, task, forgery.code.replace("{entry}", task.entry_point))
    assert verdict.status == "scored" and verdict.score == 0.0, (name, verdict)
    assert verdict.outcome in forgery.outcomes, (name, verdict.reason, verdict.explanation)
    assert forgery.reason in (verdict.reason or ""), (name, verdict.reason)


@pytest.mark.parametrize("kind", ["HumanEval/0", "io/add"])
def test_the_honest_answer_passes(
    judge: ExecutionEvaluator, tasks: dict[str, Task], kind: str
) -> None:
    verdict = run(judge, tasks[kind], HONEST[kind])
    assert (verdict.score, verdict.reason) == (1.0, "tests passed"), verdict


def test_io_mode_compares_in_the_tester_with_its_stated_rule(
    judge: ExecutionEvaluator,
) -> None:
    """0.1 + 0.2 is 0.3 within the float tolerance; a wrong value and a bool for a number
    each fail with the case that failed; an object that is not plain data never crosses."""
    assert io_cases(IO_TASK.test) == [([1, 2], 3), ({"a": 0.1, "b": 0.2}, 0.3)]
    wrong = run(judge, IO_TASK, "def add(a, b):\n    return a + b + 1e-3\n")
    assert wrong.score == 0.0 and "case 0: add(1, 2) returned 3.001, expected 3" in wrong.reason
    boolean = run(judge, IO_TASK, "def add(a, b):\n    return True if a == 1 else a + b\n")
    assert boolean.score == 0.0 and "case 0" in boolean.reason
    odd = run(judge, IO_TASK, "def add(a, b):\n    return object()\n")
    assert (odd.score, odd.outcome) == (0.0, "forged")
    assert "returned an object of class object, not plain data" in odd.reason


def test_a_helper_the_tests_use_comes_from_the_task_not_the_answer(
    judge: ExecutionEvaluator,
) -> None:
    """HumanEval/32's tests assert poly(xs, find_zero(xs)) ~ 0 with the prompt's poly: an
    answer that redefines poly to return 0 must not pass with a wrong root."""
    (task,) = load_humaneval(HumanEvalSettings(ids=["HumanEval/32"]))
    code = "def poly(xs, x):\n    return 0\n\ndef find_zero(xs):\n    return 12345.0\n"
    verdict = run(judge, task, code)
    assert (verdict.score, verdict.outcome) == (0.0, "tests_failed"), verdict


def test_only_check_function_s_own_text_runs_in_io_mode() -> None:
    """A test that merely starts like a generated one is run as written (check mode)."""
    assert io_cases(IO_TASK.test) is not None
    assert io_cases(IO_TASK.test + "    assert candidate(0, 0) == 1\n") is None
    assert io_cases(IO_TASK.test.replace("expected {expected!r}", "wanted")) is None
    assert io_cases("def check(candidate):\n    assert candidate(1, 2) == 3\n") is None
    assert io_cases(None) is None


def test_every_family_of_the_red_team_is_in_the_corpus() -> None:
    families = {forgery.family for forgery in CORPUS.values()}
    assert families == {"exit", "value", "frames", "harness", "guard", "runtime", "split",
                        "disk", "channel", "djinn", "cost", "crash", "unscored", "tolerance",
                        "host"}  # fmt: skip


def test_memorised_public_tests_fail_the_default_truth(
    judge: ExecutionEvaluator, tasks: dict[str, Task]
) -> None:
    """A lookup table from HumanEval's public test inputs to their answers passes the
    original tests while it is wrong elsewhere; the default truth (`tests: extended`) asks
    inputs it has not seen, within the task's input contract, and fails it. The honest
    answer still passes both (docs/SECURITY.md)."""
    import ast

    task = tasks["HumanEval/0"]
    assert task.test is not None
    table = {}
    for node in ast.walk(ast.parse(task.test)):
        if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
            call, expected = node.test.left, node.test.comparators[0]
            if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "candidate":
                key = repr(tuple(ast.literal_eval(a) for a in call.args))
                table[key] = ast.literal_eval(expected)
    assert len(table) == 7
    code = (f"TABLE = {table!r}\n"
            "def has_close_elements(numbers, threshold):\n"
            "    return TABLE.get(repr((numbers, threshold)), False)\n")  # fmt: skip
    assert judge.spec.tests == "extended"  # the default
    caught = run(judge, task, code)
    assert (caught.score, caught.outcome) == (0.0, "tests_failed"), caught
    assert (caught.reason or "").startswith("extended: tests failed: case "), caught.reason
    assert run(judge, task, HONEST["HumanEval/0"]).score == 1.0
    original = ExecutionEvaluator(judge.spec.model_copy(update={"tests": "original"}))
    assert run(original, task, code).score == 1.0  # the public tests alone cannot tell
    unseen = CallTests("has_close_elements", [[[1.0, 1.05], 0.1]])  # close: True
    assert run_tests(code, unseen, Limits(timeout_s=10)).values == [False]
    reference = task.prompt + (task.canonical_solution or "")
    assert run_tests(reference, unseen, Limits(timeout_s=10)).values == [True]
