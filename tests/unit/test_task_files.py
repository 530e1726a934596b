"""Your own tasks from JSONL or parquet (`tasks.files`): loaded, validated with errors that
name the file, line and field, and tested in the real sandbox like HumanEval's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from judgelab.config import HumanEvalSettings, RolloutSettings
from judgelab.config.evaluators import ExecutionSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.rollouts.generate import rollouts_frame
from judgelab.rollouts.imported import import_candidates
from judgelab.schemas import validate_file
from judgelab.tasks import tasks_frame, tasks_from_frame
from judgelab.tasks.files import load_task_file, load_task_files
from judgelab.tasks.humaneval import load_humaneval
from judgelab.verdicts import Candidate, Task
from support.scratch import BIN, scratch_env

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "inputs" / "example_tasks.jsonl"


def jsonl(tmp_path: Path, *rows: Any, name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def answer(code: str) -> Candidate:
    return Candidate(task_id="x", candidate_id="x-0", sample_index=0, completion=code, messages=[])


def test_the_shipped_example_loads() -> None:
    tasks = load_task_files(["inputs/example_tasks.jsonl"], ROOT)
    assert [t.task_id for t in tasks] == ["mine/clamp", "mine/word_count", "mine/explain"]
    assert {t.source for t in tasks} == {"files"}
    clamp, count, explain = tasks
    assert clamp.prompt == clamp.request  # no code stub given: the request
    assert clamp.test is not None and "def check(candidate)" in clamp.test
    assert count.test is not None and count.test.startswith("def check(candidate)")
    assert explain.test is None and explain.entry_point is None  # judged, no execution truth
    frame = tasks_frame(tasks)  # the tasks table's own schema accepts them
    assert tasks_from_frame(frame) == tasks


def test_input_output_pairs_become_a_check_the_sandbox_runs() -> None:
    good = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))"
    bad = "def clamp(x, lo, hi):\n    return x"
    (clamp,) = [t for t in load_task_file(EXAMPLE, "f") if t.task_id == "mine/clamp"]
    judge = ExecutionEvaluator(ExecutionSettings(name="execution", timeout_s=10))
    passed = judge.score_one(clamp, answer(f"```python\n{good}\n```"))
    failed = judge.score_one(clamp, answer(f"```python\n{bad}\n```"))
    assert (passed.status, passed.score) == ("scored", 1.0)
    assert (failed.status, failed.score) == ("scored", 0.0)
    # the first failing case, with what the call returned
    assert "case 0: clamp(5, 0, 3) returned 5, expected 3" in (failed.reason or "")


def test_a_check_function_runs_as_humaneval_s_do() -> None:
    (count,) = [t for t in load_task_file(EXAMPLE, "f") if t.task_id == "mine/word_count"]
    judge = ExecutionEvaluator(ExecutionSettings(name="execution", timeout_s=10))
    good = "def word_count(text):\n    out = {}\n    for w in text.lower().split():\n" \
           "        out[w] = out.get(w, 0) + 1\n    return out"  # fmt: skip
    assert judge.score_one(count, answer(f"```python\n{good}\n```")).score == 1.0
    wrong = "def word_count(text):\n    return {}"
    assert judge.score_one(count, answer(f"```python\n{wrong}\n```")).score == 0.0


def test_parquet_files_load_with_pairs_as_json_text(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    pl.DataFrame({
        "task_id": ["p/1"], "request": ["double x"], "entry_point": ["double"],
        "tests": [json.dumps([{"input": [2], "output": 4}])],
    }).write_parquet(path)  # fmt: skip
    (task,) = load_task_file(path, "tasks.files[0]")
    assert task.task_id == "p/1" and task.test is not None and "[([2], 4)]" in task.test
    pl.DataFrame({"task_id": ["p/1", "p/2"], "request": ["r", None]}).write_parquet(path)
    with pytest.raises(ConfigError, match=r"row 2: field 'request': Field required"):
        load_task_file(path, "tasks.files[0]")


GOOD = {"task_id": "a", "request": "r", "entry_point": "f", "tests": [{"input": [1], "output": 1}]}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([GOOD, {"task_id": "b"}], r"line 2: field 'request': Field required"),
        ([{**GOOD, "tset": "x"}], r"line 1: field 'tset': Extra inputs are not permitted"),
        ([{"task_id": "a", "request": "r", "test": "def check(c): pass"}],
         r"line 1: field '<row>': .*entry_point is required"),
        ([{**GOOD, "test": "def check(c): pass"}], r"line 1: .*not both"),
        ([{**GOOD, "entry_point": "not a name"}], r"line 1: .*is not a Python name"),
        ([{**GOOD, "tests": [{"input": 1, "output": 1}]}],
         r"line 1: field 'tests.0.input': "
         r".*a list of positional arguments or an object of keyword"),
        ([{**GOOD, "tests": []}], r"line 1: field 'tests': List should have at least 1 item"),
        ([GOOD, "", '{"task_id": "b", '], r"line 3: not JSON"),
        ([GOOD, GOOD], r"line 2: task_id 'a' already at line 1"),
        (["[1, 2]"], r"line 1: a task is a JSON object"),
        ([""], r"holds no tasks"),
    ],
)  # fmt: skip
def test_bad_rows_are_named_by_file_line_and_field(
    tmp_path: Path, rows: list[Any], message: str
) -> None:
    path = jsonl(tmp_path, *rows)
    with pytest.raises(ConfigError, match=message) as err:
        load_task_file(path, "tasks.files[0]")
    assert str(err.value).startswith(f"tasks.files[0] ({path})")


def test_missing_files_and_other_formats_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tasks.files\[0\]: no such file: .*nope.jsonl"):
        load_task_files(["nope.jsonl"], tmp_path)
    (tmp_path / "t.csv").write_text("task_id,request\na,r\n")
    with pytest.raises(ConfigError, match=r"tasks.files\[1\] .*: the file must be .jsonl or"):
        load_task_files([str(EXAMPLE), "t.csv"], tmp_path)


def test_a_task_id_from_two_sources_is_refused() -> None:
    humaneval = load_humaneval(HumanEvalSettings(limit=1))
    mine = Task(task_id="HumanEval/0", source="files", prompt="p", request="r")
    with pytest.raises(ConfigError, match=r"'HumanEval/0' comes from two task sources"):
        tasks_frame([*humaneval, mine])


def test_the_tasks_stage_freezes_them(tmp_path: Path) -> None:
    """`judgelab tasks` with a task file and three CodeI/O items: the frozen table holds the
    tasks, tests and all, and dropped.json the CodeI/O item left out, with its reason."""
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "mine.jsonl").write_text(EXAMPLE.read_text())
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["tasks"] = {
        "humaneval": {"enabled": False},
        "autorl": {"enabled": False},
        "files": ["inputs/mine.jsonl"],
        "codeio": {"enabled": True, "offset": 3, "limit": 3, "cases": 3},
    }
    params["tracking"] = {"enabled": False}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    proc = subprocess.run(
        [str(BIN / "judgelab"), "tasks", "-p", "params.yaml"],
        cwd=tmp_path, env=scratch_env(tmp_path), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    frame = validate_file(tmp_path / "data" / "tasks" / "tasks.parquet", "tasks")
    assert frame["task_id"].to_list() == [
        "mine/clamp", "mine/word_count", "mine/explain", "codeio-hq/3", "codeio-hq/5"
    ]  # fmt: skip
    assert frame["test"].null_count() == 1
    dropped = json.loads((tmp_path / "data" / "tasks" / "dropped.json").read_text())
    assert list(dropped) == ["codeio"]
    assert (dropped["codeio"]["selected"], dropped["codeio"]["kept"]) == (3, 2)
    assert dropped["codeio"]["dropped"] == {"nondeterministic": 1}


# --- your own candidates (rollouts.candidates) -------------------------------------------


def example_tasks() -> list[Task]:
    return load_task_file(EXAMPLE, "tasks.files[0]")


def test_imported_candidates_form_groups_in_file_order() -> None:
    rows = import_candidates(
        ROOT / "inputs" / "example_candidates.jsonl", "rollouts.candidates", example_tasks(),
        RolloutSettings(),
    )  # fmt: skip
    frame = rollouts_frame(rows)  # the rollouts table's own schema accepts them
    sizes = dict(frame.group_by("task_id").len().iter_rows())
    assert sizes == {"mine/clamp": 3, "mine/word_count": 2, "mine/explain": 2}
    clamp = frame.filter(pl.col("task_id") == "mine/clamp").sort("sample_index")
    assert clamp["sample_index"].to_list() == [0, 1, 2]
    assert clamp["completion"][2] == "Use max and min."
    assert set(frame["policy"]) == {"my-policy"} and set(frame["seed"]) == {-1}
    messages = json.loads(clamp["messages_json"][0])  # what judgelab would have sent
    assert messages[-1] == {"role": "user", "content": example_tasks()[0].request}
    # the same file, the same ids (judge caches hit); another completion, another id
    again = import_candidates(
        ROOT / "inputs" / "example_candidates.jsonl", "rollouts.candidates", example_tasks(),
        RolloutSettings(),
    )  # fmt: skip
    assert [r["candidate_id"] for r in again] == [r["candidate_id"] for r in rows]
    assert frame["candidate_id"].n_unique() == frame.height


def test_identical_completions_in_a_group_keep_their_own_rows(tmp_path: Path) -> None:
    same = {"task_id": "mine/clamp", "completion": "x"}
    rows = import_candidates(jsonl(tmp_path, same, same), "c", example_tasks(), RolloutSettings())
    assert [r["sample_index"] for r in rows] == [0, 1]
    assert rows[0]["candidate_id"] != rows[1]["candidate_id"]
    assert {r["policy"] for r in rows} == {"imported"}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([{"task_id": "nope", "completion": "x"}],
         r"line 1: field 'task_id': 'nope' is not in the tasks table \(mine/clamp, "),
        ([{"task_id": "mine/clamp"}], r"line 1: field 'completion': Field required"),
        ([{"task_id": "mine/clamp", "completion": "x", "score": 1}],
         r"line 1: field 'score': Extra inputs are not permitted"),
        ([{"task_id": "mine/clamp", "completion": "x", "messages": [{"role": "bot"}]}],
         r"line 1: field 'messages.0.role': Input should be 'system', 'user' or 'assistant'"),
        ([""], r"holds no candidates"),
    ],
)  # fmt: skip
def test_bad_candidate_rows_are_named_by_file_line_and_field(
    tmp_path: Path, rows: list[Any], message: str
) -> None:
    path = jsonl(tmp_path, *rows)
    with pytest.raises(ConfigError, match=message) as err:
        import_candidates(path, "rollouts.candidates", example_tasks(), RolloutSettings())
    assert str(err.value).startswith(f"rollouts.candidates ({path})")
