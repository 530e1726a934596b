"""The analysis stage: which evaluator to trust, how each scores, and whether it praises code
that fails its tests.

`run_analysis(tasks, rollouts, scores, settings, out_dir)` validates the three tables
(judgelab.schemas), computes per-evaluator statistics (`stats`) and metrics against execution
truth (`truth`), and writes, atomically (judgelab.io):

- `out_dir/metrics.json`: `{"evaluators": {name: {...stats, "truth": {...},
  "truth_parseable": {...}}}, "power": {...}, "n_tasks", "n_candidates", "n_score_rows",
  "execution_truth": {...}, "settings": {...}}` (`truth_parseable`: the same figures on
  parseable code only, `truth.Truth.parseable`; `execution_truth` counts each execution
  outcome; `power`: every pair of judges compared on `analysis.primary`, Holm-corrected, and
  how many tasks it takes to separate each pair: `analysis.power`).
  Deterministic for identical inputs and settings: sorted keys, floats rounded to 6 decimals,
  NaN written as null, no timings or wall-clock values (latency goes to the report only).
- `out_dir/plots/*.csv` (for `dvc plots`) and `out_dir/plots/png/*.png` (`plots`).
- `out_dir/report.md` and a self-contained `out_dir/report.html` (`report`).

It returns the metrics dict exactly as written to metrics.json.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from judgelab.analysis import training
from judgelab.analysis.failures import DEFAULT_MAX_FAILURE_SHARE, loud_failures
from judgelab.analysis.judge_only import judge_agreement
from judgelab.analysis.panels import bias_section
from judgelab.analysis.plots import write_csv, write_plots
from judgelab.analysis.power import power_analysis
from judgelab.analysis.report import render_html, render_markdown, worst_false_praise
from judgelab.analysis.stats import evaluator_stats, latency_summary
from judgelab.analysis.truth import (
    candidate_scores,
    execution_truth,
    resample_weights,
    truth_metrics,
)
from judgelab.analysis.writers import writer_blocks
from judgelab.analysis.writers_section import writers_section
from judgelab.config import AnalysisSettings
from judgelab.io import write_json, write_text
from judgelab.schemas import RolloutsSchema, ScoresSchema, TasksSchema, validate

__all__ = ["DIGITS", "clean_json", "compute_metrics", "run_analysis"]

logger = logging.getLogger(__name__)

DIGITS = 6
N_EXAMPLES = 5


def clean_json(obj: Any, digits: int = DIGITS) -> Any:
    """Round floats, turn NaN/inf into None and sort dict keys, recursively."""
    if isinstance(obj, dict):
        return {str(k): clean_json(obj[k], digits) for k in sorted(obj, key=str)}
    if isinstance(obj, list | tuple):
        return [clean_json(v, digits) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float) or hasattr(obj, "__float__"):
        x = float(obj)
        if not math.isfinite(x):
            return None
        return round(x, digits) + 0.0  # + 0.0 turns -0.0 into 0.0
    return obj


def compute_metrics(
    tasks: pl.DataFrame, rollouts: pl.DataFrame, scores: pl.DataFrame, settings: AnalysisSettings
) -> dict[str, Any]:
    """Every statistic and truth metric, cleaned for JSON; no files written."""
    truth = execution_truth(scores)
    if truth.reason:
        logger.warning("truth metrics unavailable: %s", truth.reason)
    parseable = truth.parseable()
    evaluators = evaluator_stats(scores)
    weights = resample_weights(len(truth.tasks), settings.bootstrap, settings.seed)
    parseable_weights = resample_weights(len(parseable.tasks), settings.bootstrap, settings.seed)
    for name, ev in evaluators.items():
        cand = candidate_scores(scores, name)
        for key, t, w in (
            ("truth", truth, weights),
            ("truth_parseable", parseable, parseable_weights),
        ):
            ev[key] = truth_metrics(
                cand, t, settings.praise_threshold, w, min_groups=settings.min_ci_groups
            )
    power = power_analysis(
        scores, truth, evaluators, settings.power, settings.min_ci_groups, settings.primary
    )
    return clean_json(
        {
            "evaluators": evaluators,
            "power": power,
            "n_tasks": tasks.height,
            "n_candidates": rollouts.height,
            "n_score_rows": scores.height,
            "execution_truth": truth.summary(),
            "settings": settings.model_dump(),
            **writer_blocks(rollouts, scores, settings),  # only with several writers/origins
        }
    )


def run_analysis(
    tasks: pl.DataFrame,
    rollouts: pl.DataFrame,
    scores: pl.DataFrame,
    settings: AnalysisSettings,
    out_dir: Path,
    *,
    training_dir: Path | None = None,
    probes_metrics: Path | None = None,
    train_judges: Sequence[str] = (),
    provenance: dict[str, Any] | None = None,
    max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE,
) -> dict[str, Any]:
    """Validate the inputs; write metrics.json, plots and the report under out_dir; return
    the metrics dict as written. `training_dir` holds the training stage's per-judge
    histories (`train_judges`: the judges configured to have one); the report shows bias
    panels from `probes_metrics` when it exists, "not run" otherwise. `provenance`
    (`judgelab.provenance`) heads the report; it stays out of metrics.json."""
    out_dir = Path(out_dir)
    tasks = validate(tasks, TasksSchema, "tasks table")
    rollouts = validate(rollouts, RolloutsSchema, "rollouts table")
    scores = validate(scores, ScoresSchema, "scores table")

    metrics = compute_metrics(tasks, rollouts, scores, settings)
    if failed := loud_failures(scores, max_failure_share):  # absent when no judge failed
        metrics["judge_failures"] = [f.line() for f in failed]
    if not scores.filter(pl.col("protocol") == "execution").height:  # a judge-only audit
        metrics["judge_only"] = clean_json(judge_agreement(scores))
    if training_dir is not None:
        metrics["training"] = clean_json(training.training_metrics(training_dir, settings))
    if train_judges:
        metrics["train_judges"] = list(train_judges)
    truth = execution_truth(scores)
    written = write_plots(
        scores,
        truth,
        metrics["evaluators"],
        settings.bins,
        out_dir / "plots",
        settings.praise_threshold,
    )
    images = {label: path for label, path in written.items() if path.suffix == ".png"}
    if training_dir is not None:
        write_csv(training.curves_frame(training_dir), out_dir / "plots" / "training_curves.csv")
        curves = out_dir / "plots" / "png" / "training_curves.png"
        if training.plot_curves(training_dir, curves):
            images["training curves"] = curves
    latency = latency_summary(scores)
    examples = worst_false_praise(scores, rollouts, truth, N_EXAMPLES, settings.praise_threshold)
    sections = [bias_section(probes_metrics), *writers_section(metrics)]
    write_text(
        out_dir / "report.md",
        render_markdown(
            metrics, latency, examples, images, out_dir, sections=sections, provenance=provenance
        ),
    )
    write_text(
        out_dir / "report.html",
        render_html(metrics, latency, examples, images, sections=sections, provenance=provenance),
    )
    write_json(out_dir / "metrics.json", metrics)
    logger.info(
        "analysis: %d evaluators, %d tasks, %d score rows -> %s",
        len(metrics["evaluators"]),
        metrics["n_tasks"],
        metrics["n_score_rows"],
        out_dir,
    )
    return metrics
