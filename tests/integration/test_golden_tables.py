"""The stages' tables are what they were: a structure change must not change a value.

Runs tasks -> rollouts -> scores -> probe -> analysis through the real CLI in a scratch
project, with every model an endpoint on a loopback server whose replies are pure functions of
the request (tests/support/pure_endpoint.py), and compares each table with the copy committed
under tests/golden/ — row order, columns, types and values; only wall-clock columns are
dropped. `JUDGELAB_REGEN_GOLDEN=1` rewrites the copies (review the diff before committing).
Training is left out: it needs the embedded policy model (tests/integration/test_training.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from tests.support.openai_server import OpenAIServer
from tests.support.pure_endpoint import pure_reply
from tests.support.scratch import BIN, scratch_env

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REGEN = os.environ.get("JUDGELAB_REGEN_GOLDEN") == "1"
# wall-clock measurements: they differ from run to run by nature
CLOCK_COLUMNS = {"latency_s", "duration_s", "elapsed_s", "seconds"}
TABLES = {
    "tasks": "data/tasks/tasks.parquet",
    "rollouts": "data/rollouts/rollouts.parquet",
    "scores": "data/scores/scores.parquet",
    "probe_scores": "data/probes/probe_scores.parquet",
    "probe_candidates": "data/probes/candidates.parquet",
}
# Endpoint URLs are part of every cache key, candidate id and run id: a fixed port keeps them.
PORT = 47613
METRICS = {
    "analysis_metrics": "data/analysis/metrics.json",
    "probe_metrics": "data/probes/metrics.json",
}


def params(base_url: str) -> dict[str, Any]:
    endpoint = {"kind": "endpoint", "base_url": base_url, "structured_output": "json_schema"}
    return {
        "models": {
            "writer": {**endpoint, "model": "writer", "family": "alpha"},
            "judge-a": {**endpoint, "model": "judge-a", "family": "alpha"},
            "judge-b": {**endpoint, "model": "judge-b", "family": "beta"},
        },
        "tasks": {
            "humaneval": {"enabled": True, "offset": 0, "limit": 6},
            "autorl": {"enabled": False, "model": "writer"},
        },
        "rollouts": {"policy": "writer", "k": 4, "temperature": 1.0, "max_tokens": 64, "seed": 0},
        "scores": {
            "repeats": 2,
            "evaluators": [
                {"name": "format", "kind": "format"},
                {"name": "syntax", "kind": "syntax"},
                {"name": "execution", "kind": "execution", "timeout_s": 10, "cpu_s": 10},
                {"name": "ruler-a", "kind": "ruler", "judge": "judge-a"},
                {"name": "rubric-b", "kind": "rubric", "judge": "judge-b"},
            ],
        },
        "train": {"judges": []},
        "analysis": {"bootstrap": 200, "seed": 0, "min_ci_groups": 5},
        "tracking": {"enabled": False},
        "probes": {
            "judges": ["ruler-a", "rubric-b"],
            "tasks": ["HumanEval/0", "HumanEval/2"],
            "permutations": 2,
            "repeats": 1,
            "policies": ["writer", "judge-a"],
            "bootstrap": 200,
        },
    }


def comparable(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop([c for c in frame.columns if c in CLOCK_COLUMNS])


def clockless(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: clockless(v) for k, v in value.items() if k not in CLOCK_COLUMNS}
    if isinstance(value, list):
        return [clockless(v) for v in value]
    return value


def run_stage(root: Path, stage: str) -> None:
    proc = subprocess.run(
        [str(BIN / "judgelab"), stage, "-p", "params.yaml"],
        cwd=root,
        env=scratch_env(root),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"judgelab {stage}:\n{proc.stdout}\n{proc.stderr}"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("golden")
    with OpenAIServer(pure_reply, port=PORT) as server:
        (root / "params.yaml").write_text(yaml.safe_dump(params(server.base_url)))
        for stage in ("tasks", "rollouts", "scores", "probe", "analysis"):
            run_stage(root, stage)
    return root


@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_matches_committed(project: Path, name: str) -> None:
    frame = comparable(pl.read_parquet(project / TABLES[name]))
    golden = GOLDEN / f"{name}.parquet"
    if REGEN:
        golden.parent.mkdir(exist_ok=True)
        frame.write_parquet(golden)
    expected = pl.read_parquet(golden)
    assert frame.schema == expected.schema
    assert frame.height == expected.height
    diff = [
        (i, c)
        for c in frame.columns
        for i, (a, b) in enumerate(zip(frame[c].to_list(), expected[c].to_list(), strict=True))
        if a != b
    ]
    assert not diff, f"{name}: {len(diff)} cells differ, first (row, column): {diff[:5]}"


@pytest.mark.parametrize("name", sorted(METRICS))
def test_metrics_match_committed(project: Path, name: str) -> None:
    metrics = clockless(json.loads((project / METRICS[name]).read_text()))
    golden = GOLDEN / f"{name}.json"
    if REGEN:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n")
    assert metrics == json.loads(golden.read_text())


RUNNERS = {
    # one call at a time: every endpoint model at max_concurrency 1, one thread
    "serial": ({"kind": "threads", "workers": 1}, 1),
    # many at once: Prefect's thread pool, 8 calls in flight per endpoint model
    "threads": ({"kind": "threads", "workers": 16}, 8),
    # a local Dask cluster of worker processes (prefect-dask's DaskTaskRunner)
    "dask": ({"kind": "dask", "workers": 2, "threads_per_worker": 4}, 8),
}


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_scores_do_not_depend_on_concurrency_or_runner(
    project: Path, tmp_path: Path, runner: str
) -> None:
    """The scores stage from a cold judge cache under each runner: the committed table."""
    settings, concurrency = RUNNERS[runner]
    for sub in ("tasks", "rollouts"):
        shutil.copytree(project / "data" / sub, tmp_path / "data" / sub)
    with OpenAIServer(pure_reply, port=PORT) as server:
        config = params(server.base_url)
        for model in config["models"].values():
            model["max_concurrency"] = concurrency
        config["runner"] = settings
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(config))
        run_stage(tmp_path, "scores")
    ruler_calls = sum("<trajectory" in str(r["body"]) for r in server.requests)
    assert ruler_calls == 6 * 2  # a cold cache: every group, every repeat was judged
    if runner != "serial":
        assert server.max_in_flight > 1
    else:
        assert server.max_in_flight == 1
    frame = comparable(pl.read_parquet(tmp_path / TABLES["scores"]))
    assert frame.equals(pl.read_parquet(GOLDEN / "scores.parquet"))
