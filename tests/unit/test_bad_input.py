"""Bad input to a stage command: a clear error naming the field or row, a non-zero exit, and
no artefact written (so nothing partial can look complete). Each case fails in the CLI's
preflight, before Prefect or any model starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from judgelab.tasks import tasks_frame
from judgelab.tasks.humaneval import load_humaneval
from judgelab_cli.main import app

ROOT = Path(__file__).resolve().parents[2]


def shipped() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "params.yaml").read_text())


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def stage(project: Path, name: str, params: dict[str, Any] | str) -> tuple[int, str]:
    path = project / "params.yaml"
    path.write_text(params if isinstance(params, str) else yaml.safe_dump(params))
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    result = CliRunner().invoke(app, [name, "--params", str(path)])
    after = sorted(p.relative_to(project) for p in project.rglob("*"))
    assert after == before, "a failed stage must not write anything"
    return result.exit_code, result.output


def test_malformed_yaml(project: Path) -> None:
    code, out = stage(project, "rollouts", "models: {qwen: [unclosed\n")
    assert code == 2 and "not valid YAML" in out


def test_wrong_type_names_the_key(project: Path) -> None:
    p = shipped()
    p["rollouts"]["k"] = "many"
    code, out = stage(project, "rollouts", p)
    assert code == 2 and "rollouts.k" in out and "integer" in out


def test_misspelt_key_names_the_key(project: Path) -> None:
    p = shipped()
    p["scores"]["repeets"] = 2
    code, out = stage(project, "scores", p)
    assert code == 2 and "scores.repeets: unknown key" in out


def test_unknown_judge_lists_the_known_models(project: Path) -> None:
    p = shipped()
    p["scores"]["evaluators"].append({"name": "ruler-x", "kind": "ruler", "judge": "gpt-9"})
    code, out = stage(project, "scores", p)
    assert code == 2 and "unknown model 'gpt-9'" in out and "qwen-0.5b" in out


def test_unknown_policy_is_named(project: Path) -> None:
    p = shipped()
    p["rollouts"]["policy"] = "qwen-7b"
    code, out = stage(project, "rollouts", p)
    assert code == 2 and "rollouts.policy: unknown model 'qwen-7b'" in out


def test_missing_api_key_variable_is_named(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JUDGELAB_TEST_MISSING_KEY", raising=False)
    p = shipped()
    p["models"]["remote"] = {"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1",
                             "model": "m", "api_key_env": "JUDGELAB_TEST_MISSING_KEY"}  # fmt: skip
    p["scores"]["evaluators"].append({"name": "ruler-remote", "kind": "ruler", "judge": "remote"})
    code, out = stage(project, "scores", p)
    assert code == 2
    assert "models.remote.api_key_env" in out and "JUDGELAB_TEST_MISSING_KEY is not set" in out
    # the policy stage does not need that model: its preflight passes on to the tables
    code, out = stage(project, "rollouts", p)
    assert code == 2 and "tasks" in out and "no such file" in out


def test_task_file_with_bad_rows_names_the_row(project: Path) -> None:
    from judgelab.config import HumanEvalSettings

    good = tasks_frame(load_humaneval(HumanEvalSettings(limit=3)))
    bad = good.with_columns(
        pl.when(pl.col("task_id") == "HumanEval/1").then(None).otherwise(pl.col("test"))
        .alias("test")
    )  # fmt: skip
    path = project / "data" / "tasks" / "tasks.parquet"
    path.parent.mkdir(parents=True)
    bad.write_parquet(path)
    code, out = stage(project, "rollouts", shipped())
    assert code == 2 and "humaneval rows need entry_point and test" in out
    assert "row 1:" in out and "HumanEval/1" in out
    good.vstack(good.head(1)).write_parquet(path)  # a duplicated task id
    code, out = stage(project, "rollouts", shipped())
    assert code == 2 and (
        "column 'task_id', row 3: must be unique (another row has the same value) "
        "(value: 'HumanEval/0')" in out
    )
