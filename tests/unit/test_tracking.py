"""MLflow layout, read back with MlflowClient: a pipeline run, a child per evaluator with
the compare-view tags, and a child per training history with its per-step curve."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from judgelab.analysis.training import training_metrics
from judgelab.config import Settings, load_settings
from judgelab.tracking import log_pipeline_run
from tests.support.report_inputs import write_training_histories

ROOT = Path(__file__).resolve().parents[2]


def scratch_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Settings, str]:
    """MLflow in tmp_path's own database, the project root there, the shipped params; returns
    the settings and the tracking URI."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("JUDGELAB_ROOT", str(tmp_path))
    return load_settings(ROOT / "params.yaml"), uri


def test_pipeline_evaluator_and_training_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, uri = scratch_project(tmp_path, monkeypatch)
    analysis = tmp_path / "analysis"
    (analysis / "plots").mkdir(parents=True)
    (analysis / "report.md").write_text("# report\n")
    (analysis / "plots" / "x.csv").write_text("a\n1\n")
    scores = tmp_path / "scores.parquet"
    scores.write_bytes(b"not really parquet, only hashed")
    write_training_histories(tmp_path / "training", ("ruler-qwen-1.5b", "execution"))
    metrics = {
        "training": training_metrics(tmp_path / "training", settings.analysis),
        "n_tasks": 3,
        "evaluators": {
            "execution": {"n_rows": 8, "mean": 0.5, "truth": {}},
            "ruler-qwen-1.5b": {"n_rows": 8, "mean": 0.9, "truth": {"false_praise_absolute": 1.0}},
        },
    }
    pid = log_pipeline_run(
        settings,
        metrics,
        analysis,
        scores_run_id="r1",
        latency={"ruler-qwen-1.5b": 42.0},
        lock_path=tmp_path / "no-dvc.lock",
        scores_path=scores,
        training_dir=tmp_path / "training",
    )

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(settings.tracking.experiment)
    runs = {r.info.run_id: r for r in client.search_runs([exp.experiment_id])}
    parent = runs.pop(pid)
    assert parent.data.tags["judgelab.kind"] == "pipeline"
    assert parent.data.metrics["n_tasks"] == 3
    version = parent.data.tags["data_version"]
    assert len(version) == 12
    artifacts = {a.path for a in client.list_artifacts(pid, "analysis")}
    assert artifacts == {"analysis/report.md", "analysis/plots"}

    by_kind: dict[str, dict[str, object]] = {"evaluator": {}, "training": {}}
    for run in runs.values():
        tags = run.data.tags
        assert tags["mlflow.parentRunId"] == pid
        assert tags["policy"] == settings.rollouts.policy
        assert tags["data_version"] == version
        by_kind[tags["judgelab.kind"]][run.info.run_name] = run
    assert sorted(by_kind["evaluator"]) == ["execution", "ruler-qwen-1.5b"]
    ruler = by_kind["evaluator"]["ruler-qwen-1.5b"]
    assert ruler.data.tags["judge"] == "qwen-1.5b"
    assert ruler.data.tags["protocol"] == "ruler"
    assert ruler.data.tags["judge_family"] == "qwen"
    assert ruler.data.metrics["truth.false_praise_absolute"] == 1.0
    assert ruler.data.metrics["latency_s.mean"] == 42.0

    assert sorted(by_kind["training"]) == ["train-execution", "train-ruler-qwen-1.5b"]
    trained = by_kind["training"]["train-ruler-qwen-1.5b"]
    assert trained.data.tags["evaluator"] == "ruler-qwen-1.5b"
    assert trained.data.tags["judge"] == "qwen-1.5b"
    assert trained.data.tags["protocol"] == "ruler"
    assert (trained.data.tags["dtype"], trained.data.tags["device"]) == ("float32", "cpu")
    curve = sorted(
        client.get_metric_history(trained.info.run_id, "reward_mean"), key=lambda m: m.step
    )
    assert [m.step for m in curve] == [0, 1, 2, 3, 4]
    assert curve[-1].value == pytest.approx(0.7)
    loss = client.get_metric_history(trained.info.run_id, "loss")
    assert sorted(m.step for m in loss) == [0, 1, 2, 3]  # no step after the last epoch
    # the fixture's epoch 3 trips the old adjacent-epoch rule (descriptive), while inside
    # every group the judge pays more for the passing sample: the alarm stays off
    marked = client.get_metric_history(trained.info.run_id, "reward_pass_divergence")
    assert [m.step for m in marked if m.value == 1.0] == [3]
    alarm = client.get_metric_history(trained.info.run_id, "reward_hacking")
    assert [m.value for m in alarm] == [0.0] * 5
    aligned = sorted(client.get_metric_history(trained.info.run_id, "alignment"),
                     key=lambda m: m.step)  # fmt: skip
    values = [m.value for m in aligned]  # epochs 3-4: every sample fails
    assert values == pytest.approx([1.0, 1.0, 1.0, 0.0, 0.0])
    assert trained.data.metrics["summary.reward_hacking_epochs"] == 0
    assert trained.data.metrics["summary.divergence_epochs"] == 1
    assert trained.data.metrics["summary.alignment.alarm.n_groups"] == 4  # epoch 4: not stepped


def test_a_child_run_per_training_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With train.seeds, one training child per (judge, seed), its curve from that seed's
    history and its summary that seed's figures; the parent keeps the judge's pooled ones."""
    settings, uri = scratch_project(tmp_path, monkeypatch)
    (tmp_path / "analysis").mkdir()
    write_training_histories(tmp_path / "training", ("execution",), seeds=(3, 4))
    metrics = {"training": training_metrics(tmp_path / "training", settings.analysis)}
    pid = log_pipeline_run(
        settings, metrics, tmp_path / "analysis", scores_run_id="r1", latency={},
        lock_path=tmp_path / "no-dvc.lock", training_dir=tmp_path / "training",
    )  # fmt: skip
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(settings.tracking.experiment)
    runs = {r.info.run_name: r for r in client.search_runs([exp.experiment_id])}
    assert sorted(runs) == ["pipeline-r1", "train-execution-seed-3", "train-execution-seed-4"]
    for seed, marks in ((3, 1), (4, 0)):
        child = runs[f"train-execution-seed-{seed}"]
        assert child.data.tags["train_seed"] == str(seed)
        assert child.data.metrics["summary.divergence_epochs"] == marks
        assert child.data.metrics["summary.reward_hacking_epochs"] == 0
        flagged = client.get_metric_history(child.info.run_id, "reward_pass_divergence")
        assert [m.step for m in flagged if m.value == 1.0] == ([3] if marks else [])
    parent = runs["pipeline-r1"].data.metrics
    assert parent["training.execution.reward_hacking_seeds"] == 0
    assert parent["training.execution.heldout.delta"] == pytest.approx(-0.75)
    assert runs["pipeline-r1"].info.run_id == pid


def test_a_figure_without_a_ci_logs_its_value_and_n_not_a_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two tasks give no CI, so MLflow gets the value and its n, no ci_low/high."""
    import polars as pl

    from judgelab.analysis.metrics import compute_metrics
    from tests.unit.test_analysis import fixture_rollouts, fixture_scores, fixture_tasks

    settings, uri = scratch_project(tmp_path, monkeypatch)
    names = {"tests": "execution", "judge": "ruler-qwen-1.5b"}
    scores = fixture_scores().with_columns(pl.col("evaluator").replace(names))
    metrics = compute_metrics(fixture_tasks(), fixture_rollouts(), scores, settings.analysis)
    (tmp_path / "analysis").mkdir()
    log_pipeline_run(settings, metrics, tmp_path / "analysis", scores_run_id="r2",
                     latency={}, lock_path=tmp_path / "no-dvc.lock")  # fmt: skip
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(settings.tracking.experiment)
    runs = client.search_runs([exp.experiment_id], "tags.evaluator = 'ruler-qwen-1.5b'")
    logged = runs[0].data.metrics
    assert logged["truth.pairwise_accuracy"] == pytest.approx(2.5 / 6, abs=1e-6)
    assert logged["truth.pairwise_accuracy_n_groups"] == 2
    assert not [k for k in logged if "_ci_low" in k or "_ci_high" in k]
