"""The task-source seam (`judgelab.tasks.registry`) and HumanEval in full."""

from __future__ import annotations

import typing
from pathlib import Path

import polars as pl
import pytest

from judgelab.config import HumanEvalSettings, TasksSettings
from judgelab.io import write_parquet
from judgelab.schemas import TasksSchema
from judgelab.tasks import tasks_frame
from judgelab.tasks.humaneval import load_humaneval
from judgelab.tasks.registry import SOURCE_NAMES, SOURCES, load_sources, source

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden" / "tasks.parquet"


def test_every_source_has_its_settings_and_the_schema_knows_it() -> None:
    assert len(set(SOURCE_NAMES)) == len(SOURCE_NAMES)
    for s in SOURCES:
        assert s.name in TasksSettings.model_fields, s.name
    assert set(SOURCE_NAMES) >= {"humaneval", "files", "codeio", "autorl"}
    frame = pl.DataFrame({"source": list(SOURCE_NAMES)})
    assert frame["source"].is_in(TasksSchema.to_schema().columns["source"].checks[0].statistics
                                 ["allowed_values"]).all()  # fmt: skip
    with pytest.raises(KeyError, match="known: humaneval, files, codeio, autorl"):
        source("mbpp")
    with pytest.raises(ValueError, match="has no loader"):
        source("autorl").load(TasksSettings(), ROOT)


def test_the_sources_give_the_golden_table_as_before(tmp_path: Path) -> None:
    """The golden settings (HumanEval 0-5, no AutoRL) through the registry: the same table,
    byte for byte."""
    settings = TasksSettings.model_validate(
        {"humaneval": {"limit": 6}, "autorl": {"enabled": False}}
    )
    tasks, reports = load_sources(settings, ROOT)
    assert reports == {}
    assert tasks_frame(tasks).equals(pl.read_parquet(GOLDEN))
    write_parquet(tmp_path / "tasks.parquet", tasks_frame(tasks))
    assert (tmp_path / "tasks.parquet").read_bytes() == GOLDEN.read_bytes()


def test_all_of_humaneval_in_one_setting() -> None:
    every = load_humaneval(HumanEvalSettings(limit="all"))
    assert len(every) == 164 and every[-1].task_id == "HumanEval/163"
    tail = load_humaneval(HumanEvalSettings(offset=160, limit="all"))
    assert [t.task_id for t in tail] == [f"HumanEval/{i}" for i in range(160, 164)]
    assert typing.get_args(HumanEvalSettings.model_fields["limit"].annotation)
    with pytest.raises(ValueError, match="limit"):
        HumanEvalSettings.model_validate({"limit": "some"})
