"""The stages' tables are what they were: a structure change must not change a value.

Runs tasks -> rollouts -> scores -> probe -> analysis through the real CLI in a scratch
project, with every model an endpoint on a loopback server whose replies are pure functions of
the request (support/pure_endpoint.py), and compares each table with the copy committed
under tests/golden/ — row order, columns, types and values; only wall-clock columns are
dropped. `JUDGELAB_REGEN_GOLDEN=1` rewrites the copies (review the diff before committing).

Training runs on its own: GRPO of the embedded SmolLM2-135M (float32, on the CPU) for two
judges, a loopback RULER judge and the format rule, from the committed tasks table. Matrix
kernels differ between CPU instruction sets (AVX2, AVX-512) in their last bits, and a GRPO step
carries that on: measured on an AVX-512 Xeon against the copies made on an AVX2-only EPYC,
the first loss differed by 1.1e-5 relative, grad norms by 2e-7. So its floating-point values
are compared to a relative 1e-4, and the adapter hashes (of the weights after each step) and
the candidate ids made from them are compared by which rows share one (the first distinct
value is 0, the next 1, ...), not by their digits; every other cell, the sampled completions,
rewards and pass rates included, must be equal.
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

from support.openai_server import OpenAIServer
from support.pure_endpoint import pure_reply
from support.scratch import BIN, scratch_env

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REGEN = os.environ.get("JUDGELAB_REGEN_GOLDEN") == "1"
# wall-clock measurements: they differ from run to run by nature
CLOCK_COLUMNS = {
    "latency_s", "duration_s", "elapsed_s", "seconds", "rollout_s", "score_s", "step_s",
    "heldout_s",
}  # fmt: skip
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
        "train": {"rewards": []},
        "analysis": {"bootstrap": 200, "seed": 0, "min_ci_groups": 5},
        "tracking": {"enabled": False},
        "probes": {
            "judges": ["ruler-a", "rubric-b"],
            "tasks": ["HumanEval/0", "HumanEval/2"],
            "permutations": 2,
            "repeats": 2,  # with the identity view's own call: the 3 a noise floor needs
            "policies": ["writer", "judge-a"],
            "bootstrap": 200,
        },
    }


TRAINING_JUDGES = ("format", "ruler-a")
TRAINING_TABLES = {
    f"training_{judge}_{table}": f"data/training/{judge}/{table}.parquet"
    for judge in TRAINING_JUDGES
    for table in ("history", "samples")
}


def training_params(base_url: str) -> dict[str, Any]:
    config = params(base_url)
    config["models"]["smollm2"] = {
        "kind": "embedded",
        "zoo": "smollm2-135m-instruct",
        "family": "smollm",
    }
    config["train"] = {
        "rewards": list(TRAINING_JUDGES),
        "policy": "smollm2",
        # the committed tables' design: torch samples (the committed samples are torch's draws;
        # llama.cpp's would redraw every sampled cell) and every task of the split trains
        # (select: all)
        "sampler": "torch",
        "select": "all",
        "device": "cpu",
        "dtype": "float32",
        "epochs": 2,
        "k": 2,
        "max_tokens": 16,
        "learning_rate": 1e-3,
        "lora": {"r": 4, "alpha": 8},
        "heldout": {
            "select": "mixed",
            "offset": 10,
            "pool": 2,
            "limit": 1,
            "samples": 2,
            "max_tokens": 16,
        },  # fmt: skip
    }
    return config


# Training's hashes of the LoRA weights after a step, and the ids built from them: the same
# structure on every CPU, not the same digits (module docstring).
WEIGHT_HASH_COLUMNS = ("adapter", "candidate_id")


def comparable(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop([c for c in frame.columns if c in CLOCK_COLUMNS])


def by_first_occurrence(frame: pl.DataFrame) -> pl.DataFrame:
    """Each hash column as the order in which its distinct values first appear."""
    columns = [c for c in WEIGHT_HASH_COLUMNS if c in frame.columns]
    return frame.with_columns(
        pl.Series(c, _first_occurrence(frame[c].to_list()), dtype=pl.Int64) for c in columns
    )


def _first_occurrence(values: list[Any]) -> list[int]:
    order: dict[Any, int] = {}
    return [order.setdefault(v, len(order)) for v in values]


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
        for stage in ("tasks", "rollouts", "scores", "probes", "analysis"):
            run_stage(root, stage)
    return root


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("golden-training")
    (root / "data" / "tasks").mkdir(parents=True)
    shutil.copy(GOLDEN / "tasks.parquet", root / TABLES["tasks"])
    with OpenAIServer(pure_reply, port=PORT) as server:
        (root / "params.yaml").write_text(yaml.safe_dump(training_params(server.base_url)))
        run_stage(root, "training")
    return root


def same_cells(a: Any, b: Any, rel: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == pytest.approx(b, rel=rel, abs=1e-12, nan_ok=True)
    return a == b


def assert_matches_golden(
    frame: pl.DataFrame, name: str, rel: float = 0.0, hashes_by_structure: bool = False
) -> None:
    frame = comparable(frame)
    golden = GOLDEN / f"{name}.parquet"
    if REGEN:
        golden.parent.mkdir(exist_ok=True)
        frame.write_parquet(golden)
    expected = pl.read_parquet(golden)
    if hashes_by_structure:
        frame, expected = by_first_occurrence(frame), by_first_occurrence(expected)
    assert frame.schema == expected.schema
    assert frame.height == expected.height
    diff = [
        (i, c)
        for c in frame.columns
        for i, (a, b) in enumerate(zip(frame[c].to_list(), expected[c].to_list(), strict=True))
        if not same_cells(a, b, rel)
    ]
    assert not diff, f"{name}: {len(diff)} cells differ, first (row, column): {diff[:5]}"


@pytest.mark.parametrize("name", sorted(TABLES))
def test_table_matches_committed(project: Path, name: str) -> None:
    assert_matches_golden(pl.read_parquet(project / TABLES[name]), name)


@pytest.mark.parametrize("name", sorted(TRAINING_TABLES))
def test_training_table_matches_committed(trained: Path, name: str) -> None:
    table = pl.read_parquet(trained / TRAINING_TABLES[name])
    assert_matches_golden(table, name, rel=1e-4, hashes_by_structure=True)


def test_training_heldout_choice_matches_committed(trained: Path) -> None:
    chosen = json.loads((trained / "data" / "training" / "heldout.json").read_text())
    golden = GOLDEN / "training_heldout.json"
    if REGEN:
        golden.write_text(json.dumps(chosen, indent=1, sort_keys=True) + "\n")
    assert chosen == json.loads(golden.read_text())


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


def slow_pure_reply(body: dict[str, Any]) -> dict[str, Any]:
    """pure_reply after 50 ms: the loopback server answers in about 1 ms, so without a delay
    calls made concurrently need not overlap on the server."""
    return {**pure_reply(body), "delay_s": 0.05}


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_scores_do_not_depend_on_concurrency_or_runner(
    project: Path, tmp_path: Path, runner: str
) -> None:
    """The scores stage from a cold judge cache under each runner: the committed table."""
    settings, concurrency = RUNNERS[runner]
    for sub in ("tasks", "rollouts"):
        shutil.copytree(project / "data" / sub, tmp_path / "data" / sub)
    with OpenAIServer(slow_pure_reply, port=PORT) as server:
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
    # what the judge cache answered, counted whichever process made the calls: each request
    # a miss, and every attempt (RULER's groups, the rubric's candidates) counted once
    calls = json.loads((tmp_path / TABLES["scores"]).with_name("calls.json").read_text())
    assert calls["judge"]["misses"] == len(server.requests)
    assert calls["judge"]["hits"] + calls["judge"]["misses"] == 6 * 2 + 6 * 4 * 2
    assert calls["judge"]["seeded"] == 0
