"""analysis stage: judge statistics, agreement with execution truth, plots, report, MLflow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.paths import ANALYSIS, PROBES_METRICS, ROLLOUTS, SCORES, TASKS, TRAINING
from flows.scores import structured_output_path
from judgelab.analysis.recheck import read_baseline
from judgelab.analysis.stats import latency_summary
from judgelab.config import Settings, load_settings
from judgelab.paths import project_root
from judgelab.provenance import provenance
from judgelab.report.outputs import run_analysis
from judgelab.schemas import validate_file
from judgelab.tracking import log_pipeline_run


def models_used(settings: Settings) -> list[str]:
    """The models behind the tables analysed: those the pipeline's stages call, and the trained
    policy (which the training stage loads itself)."""
    names = settings.models_called("pipeline")
    return sorted({*names, settings.train.policy} if settings.train.rewards else set(names))


def structured_output_modes(scores: Path) -> dict[str, Any]:
    """The modes the scores stage found for its ``auto`` judge endpoints (provenance)."""
    path = structured_output_path(scores)
    if not path.exists():
        return {}
    return {"structured_output": json.loads(path.read_text(encoding="utf-8"))}


@flow(name="judgelab-analysis")
def analysis_flow(
    params: Path = Path("params.yaml"),
    tasks: Path = TASKS,
    rollouts: Path = ROLLOUTS,
    scores: Path = SCORES,
    training: Path = TRAINING,
    out: Path = ANALYSIS,
) -> Path:
    settings = load_settings(params)
    baseline = settings.analysis.truth_baseline
    truth_baseline = read_baseline(project_root() / baseline) if baseline else None
    scores_frame = validate_file(scores, "scores")
    metrics = run_analysis(
        validate_file(tasks, "tasks"),
        validate_file(rollouts, "rollouts"),
        scores_frame,
        settings.analysis,
        out,
        training_dir=training,
        probes_metrics=PROBES_METRICS,
        train_rewards=settings.train.rewards,
        provenance=provenance(settings, params, project_root(), models_used(settings))
        | structured_output_modes(scores),
        max_failure_share=settings.scores.max_failure_share,
        truth_baseline=truth_baseline,
        judged=settings.scores.populations,
    )
    if settings.tracking.enabled:
        latency = {
            name: s["mean_latency_s"]
            for name, s in latency_summary(scores_frame).items()
            if s["mean_latency_s"] is not None
        }
        run = log_pipeline_run(
            settings,
            metrics,
            out,
            scores_run_id=scores_frame["run_id"][0],
            latency=latency,
            scores_path=scores,
            training_dir=training,
        )
        get_run_logger().info("MLflow run %s", run)
    return out
