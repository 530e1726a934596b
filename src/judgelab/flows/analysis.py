"""analysis stage: judge statistics, agreement with execution truth, plots, report
(`judgelab.report.outputs.analyse_stage`, which the Python API's `analyse` runs too), and
the MLflow run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from judgelab.analysis.stats import latency_summary
from judgelab.config import Settings, load_settings
from judgelab.flows.paths import ANALYSIS, PROBES_METRICS, ROLLOUTS, SCORES, TASKS, TRAINING
from judgelab.paths import calls_file, project_root, structured_output_path
from judgelab.provenance import provenance
from judgelab.report.outputs import analyse_stage
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


def cache_calls(*tables: Path) -> dict[str, Any]:
    """What the stages that wrote `tables` found in their caches (provenance): e.g.
    ``{"calls": {"completions": {"hits": 8, "seeded": 8, "misses": 0}, "judge": ...}}``."""
    calls: dict[str, Any] = {}
    for table in tables:
        path = calls_file(table)
        if path.exists():
            calls |= json.loads(path.read_text(encoding="utf-8"))
    return {"calls": calls} if calls else {}


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
    metrics = analyse_stage(
        validate_file(tasks, "tasks"),
        validate_file(rollouts, "rollouts"),
        scores_frame,
        settings,
        out,
        root=project_root(),
        training_dir=training,
        probes_metrics=PROBES_METRICS,
        provenance=provenance(settings, params, project_root(), models_used(settings))
        | structured_output_modes(scores)
        | cache_calls(rollouts, scores),
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
