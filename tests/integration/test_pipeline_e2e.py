"""The whole pipeline, end to end, on real embedded models and a tiny subset, under dvc.

Runs in a scratch project (a copy of dvc.yaml, src/, inputs/ and probes/ with small
params) so the checkout's own data and caches are untouched. Checks: every stage's table
validates, every evaluator has metrics incl. truth agreement, the report and the MLflow runs
exist, a second `dvc repro` reruns nothing, and changing only an analysis parameter reruns
only the analysis stage.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from judgelab.config import parse_settings
from judgelab.schemas import validate_file
from support.scratch import scratch_env

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.integration


def tiny_params() -> dict:
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["tasks"]["humaneval"].update(offset=2, limit=2)
    p["tasks"]["autorl"].update(n=1, max_attempts=6)
    p["rollouts"].update(k=2, max_tokens=200)
    p["scores"]["evaluators"] = [
        {"name": "format", "kind": "format"},
        {"name": "syntax", "kind": "syntax"},
        {"name": "execution", "kind": "execution", "timeout_s": 10},
        {"name": "ruler-smollm2-135m", "kind": "ruler", "judge": "smollm2-135m"},
        {"name": "rubric-smollm2-135m", "kind": "rubric", "judge": "smollm2-135m"},
    ]
    # Training: the smallest policy, one epoch, so the stage runs end to end in seconds.
    p["train"] = {
        "rewards": ["execution", "ruler-smollm2-135m"],
        "policy": "smollm2-135m",
        # the default: llama.cpp samples with the adapter as a GGUF LoRA (SmolLM2 is a Llama:
        # training/export.py permutes its q/k rows as llama.cpp's converter does)
        "sampler": "llama.cpp",
        "alarm_alpha": 0.05,  # DVC needs every key a stage lists (analysis: train.alarm_alpha)
        "epochs": 1,
        "k": 2,
        "max_tokens": 48,
        # select: mixed screens a pool (8 tasks by default) with the base policy before
        # epoch 0; a pool of 2 still screens and chooses, with a quarter of the draws
        "heldout": {"offset": 100, "pool": 2, "limit": 1, "max_tokens": 48},
    }
    p.pop("probes", None)  # the bias probes have their own pipeline and tests
    p["analysis"]["bootstrap"] = 200
    parse_settings(p)  # the test's own params must be valid
    return p


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    proj = tmp_path_factory.mktemp("project")
    for name in ("dvc.yaml", ".dvcignore"):
        shutil.copy(ROOT / name, proj / name)
    # inputs/: dvc's tasks and rollouts stages read it; probes/: the analysis stage depends on
    # the probes pipeline's folder (its dvc.lock records each probe result)
    for name in ("src", "inputs", "probes"):
        shutil.copytree(
            ROOT / name, proj / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
    (proj / "params.yaml").write_text(yaml.safe_dump(tiny_params(), sort_keys=False))
    return proj


@pytest.fixture(scope="module")
def env(project: Path) -> dict[str, str]:
    e = scratch_env(project, PYTHONPATH=str(project))
    run(["git", "init", "-q"], project, e)
    run([str(BIN / "dvc"), "init", "-q"], project, e)
    run([str(BIN / "dvc"), "config", "core.analytics", "false"], project, e)
    return e


@pytest.fixture(scope="module")
def first_repro(project: Path, env: dict[str, str]) -> str:
    return run([str(BIN / "dvc"), "repro"], project, env)


def test_stages_produce_valid_tables(project: Path, first_repro: str) -> None:
    tasks = validate_file(project / "data/tasks/tasks.parquet", "tasks")
    assert sorted(tasks["source"].to_list()) == ["autorl", "humaneval", "humaneval"]
    rollouts = validate_file(project / "data/rollouts/rollouts.parquet", "rollouts")
    assert rollouts.height == 3 * 2
    scores = validate_file(project / "data/scores/scores.parquet", "scores")
    assert scores.height == 6 * 5  # every candidate x every evaluator, none dropped
    execution = scores.filter(pl.col("evaluator") == "execution")
    humaneval = set(tasks.filter(pl.col("source") == "humaneval")["task_id"])
    assert execution.filter(pl.col("task_id").is_in(humaneval))["status"].unique().to_list() == [
        "scored"
    ]
    assert execution.filter(~pl.col("task_id").is_in(humaneval))["reason"].unique().to_list() == [
        "task has no tests"
    ]
    ruler = scores.filter(pl.col("protocol") == "ruler")
    assert ruler["permutation"].null_count() == 0  # every RULER call records its order
    unscored = scores.filter(pl.col("status") == "unscored")
    assert unscored["reason"].null_count() == 0


def test_metrics_report_and_mlflow(project: Path, first_repro: str, env: dict[str, str]) -> None:
    metrics = json.loads((project / "data/analysis/metrics.json").read_text())
    names = {"format", "syntax", "execution", "ruler-smollm2-135m", "rubric-smollm2-135m"}
    assert set(metrics["evaluators"]) == names
    for name in names - {"execution"}:
        assert "truth" in metrics["evaluators"][name]
    html = (project / "data/analysis/report.html").read_text()
    assert "ruler-smollm2-135m" in html and "<table" in html
    out = run(
        [
            str(BIN / "python"),
            "-c",
            (
                "from mlflow.tracking import MlflowClient; c = MlflowClient();"
                "e = c.get_experiment_by_name('judgelab');"
                "runs = c.search_runs([e.experiment_id]);"
                "print(sorted(r.data.tags.get('judgelab.kind','') for r in runs))"
            ),
        ],
        project,
        {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}"},
    )
    assert "'pipeline'" in out and out.count("'evaluator'") == 5
    assert out.count("'training'") == 2


def test_training_stage_history_checkpoints_and_mlflow(
    project: Path, first_repro: str, env: dict[str, str]
) -> None:
    for judge in ("execution", "ruler-smollm2-135m"):
        history = validate_file(project / f"data/training/{judge}/history.parquet", "history")
        assert history["epoch"].to_list() == [0, 1]
        samples = validate_file(
            project / f"data/training/{judge}/samples.parquet", "training_samples"
        )
        assert set(samples["split"]) == {"train", "heldout"}
        ckpts = sorted(p.name for p in (project / f"data/training/{judge}/checkpoints").iterdir())
        assert ckpts == ["step-001"]
    metrics = json.loads((project / "data/analysis/metrics.json").read_text())
    assert set(metrics["training"]) == {"execution", "ruler-smollm2-135m"}
    held = metrics["training"]["execution"]["heldout"]
    assert held["n_tasks"] == 1 and held["base"] is not None and held["final"] is not None
    html = (project / "data/analysis/report.html").read_text()
    assert 'id="training"' in html
    out = run(
        [
            str(BIN / "python"),
            "-c",
            (
                "from mlflow.tracking import MlflowClient; c = MlflowClient();"
                "e = c.get_experiment_by_name('judgelab');"
                "runs = [r for r in c.search_runs([e.experiment_id])"
                " if r.data.tags.get('judgelab.kind') == 'training'];"
                "r = [r for r in runs if r.info.run_name == 'train-execution'][0];"
                "h = c.get_metric_history(r.info.run_id, 'heldout_pass_rate');"
                "print('epochs', sorted(m.step for m in h));"
                "a = c.list_artifacts(r.info.run_id, 'checkpoints');"
                "print('artifacts', [x.path for x in a])"
            ),
        ],
        project,
        {**env, "MLFLOW_TRACKING_URI": f"sqlite:///{project / 'mlflow.db'}"},
    )
    assert "epochs [0, 1]" in out, out
    assert "checkpoints/step-001" in out, out


def test_the_run_is_quiet_and_shows_progress(first_repro: str) -> None:
    """A run's output is readable: no line per HTTP request or LiteLLM banner (those need
    `judgelab -v`), and off a terminal each stage says where it is in plain progress lines."""
    lines = first_repro.splitlines()
    assert not [ln for ln in lines if "HTTP Request:" in ln]
    assert not [ln for ln in lines if "LiteLLM" in ln and "WARNING" not in ln]
    for stage in ("rollouts", "scores", "train"):
        assert any(ln.startswith(f"[judgelab] {stage}") for ln in lines), stage
    assert len(lines) < 400, f"{len(lines)} lines of output"


def test_second_repro_reruns_nothing(project: Path, first_repro: str, env: dict[str, str]) -> None:
    out = run([str(BIN / "dvc"), "repro"], project, env)
    assert "Running stage" not in out, out


def test_analysis_param_reruns_only_analysis(
    project: Path, first_repro: str, env: dict[str, str]
) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["analysis"]["praise_threshold"] = 0.7
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = run([str(BIN / "dvc"), "repro"], project, env)
    assert "Running stage 'analysis'" in out
    for stage in ("tasks", "rollouts", "scores", "training"):
        assert f"Running stage '{stage}'" not in out
