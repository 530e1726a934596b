"""CodeI/O tasks (`tasks.codeio`): read from the installed reasoning-gym wheel without importing
it, checked before anything runs, tests computed in the real sandbox (two runs, per-item
budget), every dropped item counted by reason, the same settings giving the same table."""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from judgelab.config import (
    MUTANT_KINDS,
    CodeIOSettings,
    HumanEvalSettings,
    RolloutSettings,
    TasksSettings,
)
from judgelab.config.evaluators import ExecutionSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.io import write_parquet
from judgelab.probes.design import calibration_group
from judgelab.rollouts.contrast import Skipped, canonical_source, contrast_groups, execution_check
from judgelab.rollouts.contrast import main as contrast_main
from judgelab.rollouts.imported import import_candidates
from judgelab.tasks import tasks_frame, tasks_from_frame
from judgelab.tasks.codeio import (
    REASONS,
    Drop,
    Item,
    data_file,
    load_codeio,
    make_tasks,
    prepare,
    read_items,
    select,
    spec_arguments,
)
from judgelab.tasks.humaneval import load_humaneval
from judgelab.tasks.registry import tasks_by_id
from judgelab.verdicts import Candidate, Task

ROOT = Path(__file__).resolve().parents[2]

SPEC = (
    "Input:\n  `a` (int): first.\n  `b` (list of int): second.\n\nOutput:\n  `return` (int): sum."
)
GENERATOR = (
    "def generate_input(rng):\n    return {'a': rng.randint(0, 9), 'b': [rng.randint(0, 9)]}"
)
# Items at offset 3 of codeio-hq: 3 and 5 are deterministic, 4's reference calls random.
REAL = CodeIOSettings(enabled=True, offset=3, limit=3, cases=3)


def item(code: str, generator: str = GENERATOR, **extra: Any) -> dict[str, Any]:
    return {"task_description": "What is a plus the sum of b?", "input_output_spec": SPEC,
            "code_sample": code, "input_generator": generator, **extra}  # fmt: skip


def answer(code: str) -> Candidate:
    return Candidate(task_id="x", candidate_id="x-0", sample_index=0, completion=code, messages=[])


@pytest.fixture(scope="module")
def real() -> tuple[list[Task], dict[str, Any]]:
    result = load_codeio(REAL)
    return result.tasks, result.report


def test_the_data_file_is_read_from_the_wheel_without_importing_it() -> None:
    items = read_items(data_file("codeio-hq.jsonl.gz"))
    assert len(items) == 2750 and "reasoning_gym" not in sys.modules
    assert {"task_description", "code_sample", "input_generator", "clarity"} <= set(items[0])
    assert len(read_items(data_file("codeio.jsonl.gz"))) == 3002  # JSON lines, not an array


def test_selection_filters_orders_and_slices() -> None:
    items = [{"clarity": c, "difficulty": d} for c, d in [(7, 8), (9, 3), (None, 5), (8, 9)]]
    assert select(items, CodeIOSettings(limit=10)) == [0, 1, 2, 3]
    assert select(items, CodeIOSettings(limit=10, min_clarity=8)) == [1, 3]
    assert select(items, CodeIOSettings(limit=10, max_difficulty=5)) == [1, 2]
    assert select(items, CodeIOSettings(offset=1, limit=2)) == [1, 2]
    shuffled = select(items, CodeIOSettings(limit=10, shuffle=True, seed=3))
    assert sorted(shuffled) == [0, 1, 2, 3]
    assert shuffled == select(items, CodeIOSettings(limit=10, shuffle=True, seed=3))
    with pytest.raises(ValueError, match="min_difficulty"):
        CodeIOSettings(min_difficulty=7, max_difficulty=6)


def test_the_spec_names_the_arguments() -> None:
    assert spec_arguments(SPEC) == ["a", "b"]
    nested = (
        "Input:\n  `cfg` (dict): settings:\n    - `depth` (int): d.\n\nOutput:\n  `return` (int)"
    )
    assert spec_arguments(nested) == ["cfg"]
    assert spec_arguments("Output:\n  `return` (int)") is None


@pytest.mark.parametrize(
    ("raw", "reason", "detail"),
    [
        ("not json", "malformed", "not json"),
        ({"code_sample": "x"}, "malformed", "'task_description' is missing"),
        (item("def main_solution(a, b)\n"), "malformed", "'code_sample' does not parse"),
        (item("def solve(a, b):\n    return a"), "malformed", "no top-level main_solution"),
        (item("def main_solution(a, c):\n    return a"), "malformed", "are not main_solution's"),
        (item("def main_solution(a, b):\n    return a", "x = 1"), "malformed", "generate_input"),
        (item("import numpy as np\ndef main_solution(a, b):\n    return a"),
         "non_stdlib_import", "numpy"),
        (item("def main_solution(a, b):\n    from scipy import special\n    return a"),
         "non_stdlib_import", "scipy"),
    ],
)  # fmt: skip
def test_items_that_cannot_run_are_dropped_before_running(
    raw: Any, reason: str, detail: str
) -> None:
    dropped = prepare(raw, "codeio-hq/7", CodeIOSettings())
    assert isinstance(dropped, Drop) and dropped.reason == reason and detail in dropped.detail
    assert dropped.reason in REASONS


def test_each_failure_in_the_sandbox_is_its_own_reason() -> None:
    """One batch: items that raise, print, return constants or sets, use random or die; the
    good items on either side of them still become tasks."""
    good = "import math\ndef main_solution(a, b):\n    return math.prod([a + 1, *b]) + 0.5"
    raw = {
        "good": item(good),
        "gen": item(good, "def generate_input(rng):\n    raise ValueError('no input')"),
        "ref": item("def main_solution(a, b):\n    return b[5]"),
        "prints": item("def main_solution(a, b):\n    print(a + sum(b))"),
        "const": item("def main_solution(a, b):\n    return 'same'"),
        "set": item("def main_solution(a, b):\n    return {a}"),
        "random": item("import random\ndef main_solution(a, b):\n    return random.random()"),
        "slow": item("def main_solution(a, b):\n    while True:\n        a += 1"),
        "exits": item("import os\ndef main_solution(a, b):\n    os._exit(3)"),
        "good2": item(good.replace("+ 0.5", "- 1")),
        # right when imported, wrong when run as the harness runs a candidate (a script)
        "script": item(good + "\nif __name__ == '__main__':\n    main_solution = max"),
    }
    settings = CodeIOSettings(enabled=True, cases=3, item_timeout_s=0.5, batch=20, workers=1)
    tasks, drops = make_tasks(list(raw.items()), settings)
    assert [t.task_id for t in tasks] == ["good", "good2"]
    got = {d.task_id: d.reason for d in drops}
    assert got == {"gen": "generator_error", "ref": "reference_error", "prints": "returns_none",
                   "const": "constant_output", "set": "unserialisable", "slow": "slow",
                   "random": "nondeterministic", "exits": "crashed",
                   "script": "reference_fails_tests"}  # fmt: skip
    details = {d.task_id: d.detail for d in drops}
    assert "IndexError" in details["ref"] and "an output: TypeError" in details["set"]
    assert "exit 3" in details["exits"]


def test_a_hang_in_c_or_a_killed_run_costs_only_its_item() -> None:
    """A loop inside one C call (no signal handler runs) is killed at the item's budget; an
    item that kills the whole sandboxed run loses itself only: the items after it run again
    in a run of their own."""
    hang = "def main_solution(a, b):\n    return sum(range(10**13))"
    killer = (
        "import os, signal\ndef main_solution(a, b):\n    os.kill(os.getppid(), signal.SIGKILL)"
    )
    good = "def main_solution(a, b):\n    return a + sum(b)"
    settings = CodeIOSettings(enabled=True, cases=2, item_timeout_s=0.5, batch=5, workers=1)
    raw = [("hang", item(hang)), ("killer", item(killer)), ("good", item(good))]
    tasks, drops = make_tasks(raw, settings)
    assert [t.task_id for t in tasks] == ["good"]
    assert [(d.task_id, d.reason) for d in drops] == [("hang", "slow"), ("killer", "crashed")]
    assert "sandbox killed" in drops[1].detail


def test_real_items_become_tasks_their_references_pass(real: tuple[list[Task], dict]) -> None:
    tasks, report = real
    assert [t.task_id for t in tasks] == ["codeio-hq/3", "codeio-hq/5"]
    assert report["selected"] == 3 and report["kept"] == 2
    assert report["dropped"] == {"nondeterministic": 1}
    assert report["dropped_items"][0]["task_id"] == "codeio-hq/4"
    task = tasks[0]
    params = prepare(read_items(data_file("codeio-hq.jsonl.gz"))[3], task.task_id, REAL)
    assert isinstance(params, Item)
    signature = f"main_solution({', '.join(params.params)})"
    assert task.request.startswith(f"Write a Python function `{signature}`")
    assert task.prompt.startswith(f"def {signature}:")
    judge = ExecutionEvaluator(ExecutionSettings(name="execution", timeout_s=10))
    for t in tasks:
        verdict = judge.score_one(t, answer(f"```python\n{t.canonical_solution}\n```"))
        assert verdict.score == 1.0, (t.task_id, verdict.reason)
    wrong = f"def {signature}:\n    return None"
    assert judge.score_one(task, answer(f"```python\n{wrong}\n```")).score == 0.0
    assert tasks_from_frame(tasks_frame(tasks)) == tasks  # the tasks table holds them


def test_same_settings_same_table(real: tuple[list[Task], dict], tmp_path: Path) -> None:
    def md5(tasks: list[Task], name: str) -> str:
        write_parquet(tmp_path / name, tasks_frame(tasks))
        return hashlib.md5((tmp_path / name).read_bytes()).hexdigest()

    again = load_codeio(REAL)
    assert md5(real[0], "a.parquet") == md5(again.tasks, "b.parquet")
    assert again.report == real[1]
    other = load_codeio(REAL.model_copy(update={"seed": 1}))
    assert [t.test for t in other.tasks] != [t.test for t in real[0]]


def test_disabled_reads_nothing_and_a_wrong_version_is_named(monkeypatch: Any) -> None:
    assert load_codeio(CodeIOSettings()).tasks == []
    import judgelab.tasks.codeio as codeio

    monkeypatch.setattr(codeio, "PACKAGE_VERSION", "9.9.9")
    with pytest.raises(ConfigError, match="reasoning-gym 0.1.25 is installed"):
        data_file("codeio-hq.jsonl.gz")


def test_the_probes_build_a_known_truth_group_from_a_codeio_task(
    real: tuple[list[Task], dict],
) -> None:
    """probes.tasks may name a CodeI/O item: it is built with tasks.codeio's settings (the
    tests the tasks table has), its reference is the canonical member as it is (a whole
    program, not a body under the stub) and its mutants fail its tests in the sandbox."""
    settings = TasksSettings.model_validate({"codeio": {"cases": REAL.cases}})
    tasks = tasks_by_id(settings, ROOT, ["codeio-hq/3", "HumanEval/0"], "probes.tasks")
    assert [t.task_id for t in tasks] == ["codeio-hq/3", "HumanEval/0"]
    assert tasks[0] == real[0][0]
    reference = tasks[0].canonical_solution
    assert reference is not None
    assert canonical_source(tasks[0]) == ast.unparse(ast.parse(reference))
    group = calibration_group(tasks[0], ["operator_flip", "dropped_return"], execution_check(), 0)
    kinds = sorted(m.kind for m in group.members)
    assert kinds.count("canonical") == 1 and "mutant" in kinds
    assert all(m.passed is False for m in group.members if m.kind == "mutant")
    with pytest.raises(ConfigError, match="codeio-hq/4 cannot be a task: nondeterministic"):
        tasks_by_id(settings, ROOT, ["codeio-hq/4"], "probes.tasks")
    with pytest.raises(ConfigError, match=r"probes.tasks: no task source holds \['mbpp/1'\]"):
        tasks_by_id(settings, ROOT, ["mbpp/1"], "probes.tasks")


def test_known_truth_contrast_groups_need_no_policy(
    real: tuple[list[Task], dict], tmp_path: Path
) -> None:
    """HumanEval's canonical solution and a CodeI/O reference, each with mutants the sandbox
    proved wrong: rows `rollouts.candidates` imports, every writer named."""
    [humaneval] = load_humaneval(HumanEvalSettings(ids=["HumanEval/0"]))
    tasks = [humaneval, real[0][0]]
    table = tmp_path / "tasks.parquet"
    write_parquet(table, tasks_frame(tasks))
    out = tmp_path / "contrast.jsonl"
    contrast_main([str(table), str(out), "--k", "4", "--non-answer"])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    check = execution_check()
    by_id = {t.task_id: t for t in tasks}
    for task in tasks:
        group = [r for r in rows if r["task_id"] == task.task_id]
        writers = sorted(r["policy"] for r in group)
        assert len(group) == 4 and writers.count("reference") == 1 and "non_answer" in writers
        assert len(set(writers) & set(MUTANT_KINDS)) >= 1
        for r in group:  # the truth each writer stands for, checked again in the sandbox
            assert check(by_id[r["task_id"]], r["completion"]) is (r["policy"] == "reference")
    imported = import_candidates(out, "rollouts.candidates", tasks, RolloutSettings())
    assert [r["policy"] for r in imported] == [r["policy"] for r in rows]
    no_ref = Task(
        task_id="t", source="files", prompt="p", entry_point="f", test="def check(c): pass"
    )
    rows2, skipped = contrast_groups([no_ref], 4, check)
    assert rows2 == [] and skipped == [Skipped("t", "no tests or no reference solution")]
