"""analysis stage: judge statistics, agreement with execution truth, plots, report, MLflow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.scores import structured_output_path
from flows.stages import ANALYSIS, PROBES_METRICS, ROLLOUTS, SCORES, TASKS, TRAINING
from judgelab.analysis import run_analysis
from judgelab.analysis.stats import latency_summary
from judgelab.config import Settings, load_settings
from judgelab.paths import project_root
from judgelab.provenance import provenance
from judgelab.schemas import validate_file
from judgelab.tracking import log_pipeline_run


def models_used(settings: Settings) -> list[str]:
    """The models behind the tables analysed: the judges, the policy (unless the candidates
    were imported), the trained policy and the AutoRL task writer."""
    names = [ev.judge_model for ev in settings.scores.evaluators if ev.judge_model is not None]
    if settings.rollouts.candidates is None:
        names += settings.rollouts.writers
    if settings.train.judges:
        names.append(settings.train.policy)
    if settings.tasks.autorl.enabled and settings.tasks.autorl.n:
        names.append(settings.tasks.autorl.model)
    return sorted(set(names))


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
    scores_frame = validate_file(scores, "scores")
    metrics = run_analysis(
        validate_file(tasks, "tasks"),
        validate_file(rollouts, "rollouts"),
        scores_frame,
        settings.analysis,
        out,
        training_dir=training,
        probes_metrics=PROBES_METRICS,
        train_judges=settings.train.judges,
        provenance=provenance(settings, params, project_root(), models_used(settings))
        | structured_output_modes(scores),
        max_failure_share=settings.scores.max_failure_share,
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
