"""Each stage table is built from its pandera model (`schemas.columns`): the file a stage writes
has the model's columns, in the model's order, with the model's dtypes, and reads back valid."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pandera.polars as pa
import polars as pl
import pytest

from judgelab.io import write_parquet
from judgelab.probes.calls import calls_frame
from judgelab.probes.design import Member, ProbeGroup, View
from judgelab.probes.run import candidates_frame, probe_scores_frame
from judgelab.rollouts.generate import rollouts_frame
from judgelab.schemas import SCHEMAS, HistorySchema, columns, validate_file
from judgelab.scoring import scores_frame
from judgelab.tasks import tasks_frame
from judgelab.training.history import NOT_COLUMNS, EpochRow
from judgelab.verdicts import Candidate, Task
from tests.support.report_inputs import write_training_histories

TASK = Task(
    task_id="HumanEval/0",
    source="humaneval",
    request="write f",
    prompt="def f():",
    entry_point="f",
    test="assert f()",
    canonical_solution=None,  # a column of nulls: only the schema gives it a type
)
ONE = Candidate(task_id="HumanEval/0", candidate_id="c1", sample_index=0, completion="x")
TWO = Candidate(task_id="HumanEval/0", candidate_id="c2", sample_index=1, completion="y")
SCORE = {
    "run_id": "r",
    "task_id": "HumanEval/0",
    "candidate_id": "c1",
    "evaluator": "syntax",
    "protocol": "rule",
    "judge": None,
    "repeat": 0,
    "score": 1.0,
    "raw_score": 1.0,
    "status": "scored",
    "out_of_range": False,
    "reason": None,
    "explanation": None,
    "latency_s": 0.0,
    "slot": None,
    "permutation": None,
    "outcome": None,
}
PROBE = {
    "group_id": "g1",
    "probe": "calibration",
    "view": "perm:0",
    "base_id": "c1",
    "treated": False,
    "kind": "canonical",
    "variant": None,
    "policy": None,
    "policy_family": None,
    "passed": None,
    "judge_family": None,
}
CALL = {
    "evaluator": "ruler-j",
    "group_id": "g1",
    "view": "atk:master_key_colon",
    "repeat": 0,
    "candidate_id": None,  # a group judge's call: a column of nulls, typed by the schema
    "attempt": 0,
    "cached": False,
    "ok": True,
    "prompt_tokens": None,
    "completion_tokens": 7,
    "reply_latency_s": None,
}
ROLLOUT = {
    "task_id": "HumanEval/0",
    "sample_index": 0,
    "candidate_id": "c1",
    "policy": "p",
    "model_sha256": "abc",
    "seed": 7,
    "messages_json": "[]",
    "completion": "x",
    "finish_reason": None,
    "completion_tokens": 3,
    "latency_s": 0.1,
    "cache_key": "k",
}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{table kind: the file its stage's own builder wrote}, for every kind in SCHEMAS."""
    out = tmp_path_factory.mktemp("tables")
    group = ProbeGroup("g1", "calibration", TASK, [Member(ONE, "canonical"), Member(TWO, "mutant")])
    views = {"g1": [View("perm:0", [0, 1])]}
    frames = {
        "tasks": tasks_frame([TASK]),
        "rollouts": rollouts_frame([ROLLOUT]),
        "scores": scores_frame([SCORE]),
        "probe_scores": probe_scores_frame([SCORE | PROBE]),
        "probe_candidates": candidates_frame([group], views),
        "probe_calls": calls_frame([CALL]),
    }
    paths = {kind: out / f"{kind}.parquet" for kind in frames}
    for kind, frame in frames.items():
        write_parquet(paths[kind], frame)
    write_training_histories(out / "training", ("judge",))  # through the loop's own builders
    paths["history"] = out / "training/judge/history.parquet"
    paths["training_samples"] = out / "training/judge/samples.parquet"
    return paths


def test_every_model_has_a_written_table(written: dict[str, Path]) -> None:
    assert set(written) == set(SCHEMAS)


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_a_written_table_has_its_models_columns_in_order(
    written: dict[str, Path], kind: str
) -> None:
    on_disk = pl.read_parquet_schema(written[kind])
    assert list(on_disk.items()) == list(columns(SCHEMAS[kind]).items())
    validate_file(written[kind], kind)


def test_columns_keep_the_declared_order_and_map_each_type() -> None:
    class Table(pa.DataFrameModel):
        flag: bool
        name: str = pa.Field(nullable=True)
        count: int
        rate: float

    assert list(columns(Table).items()) == [
        ("flag", pl.Boolean),
        ("name", pl.String),
        ("count", pl.Int64),
        ("rate", pl.Float64),
    ]


def test_the_loop_fills_in_the_history_models_row() -> None:
    """EpochRow carries every history column but those history_frame derives across rows;
    a field the model lacks would be dropped from the file without a word."""
    row = {f.name for f in fields(EpochRow)} - set(NOT_COLUMNS)
    derived = {"evalue", "reward_hacking", "reward_pass_divergence"}
    assert row == set(columns(HistorySchema)) - derived
