"""The analysis stage's outputs, written atomically (judgelab.io) under `out_dir`:

- `metrics.json`: `judgelab.analysis.metrics.audit_metrics`, exactly as returned;
- `plots/*.csv` (for `dvc plots`) and `plots/png/*.png` (`report.plots`; the training curves
  when a training stage ran);
- `report.md` and a self-contained `report.html` (`report.audit`), with the bias panels of the
  probes stage (`report.panels`) and the worst false praise (`analysis.examples`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from judgelab.analysis import training
from judgelab.analysis.examples import worst_false_praise
from judgelab.analysis.metrics import audit_metrics
from judgelab.analysis.recheck import read_baseline
from judgelab.analysis.stats import latency_summary
from judgelab.analysis.truth import Truth, execution_truth
from judgelab.analysis.writers import split_populations
from judgelab.config import AnalysisSettings, Settings
from judgelab.io import write_json, write_text
from judgelab.report.audit import render_html, render_markdown
from judgelab.report.decision import DECISION_IMAGE, forest_label
from judgelab.report.panels import bias_section
from judgelab.report.plots import plot_forest, write_csv, write_plots
from judgelab.report.recheck import recheck_section
from judgelab.report.split_share import IMAGE as SPLIT_SHARE_IMAGE
from judgelab.report.split_share import plot_split_share, split_share_section
from judgelab.report.training import plot_curves
from judgelab.report.writers import known_truth_section, writers_section
from judgelab.schemas import RolloutsSchema, ScoresSchema, TasksSchema, validate
from judgelab.scoring.failures import DEFAULT_MAX_FAILURE_SHARE

logger = logging.getLogger(__name__)

N_EXAMPLES = 5


def run_analysis(
    tasks: pl.DataFrame,
    rollouts: pl.DataFrame,
    scores: pl.DataFrame,
    settings: AnalysisSettings,
    out_dir: Path,
    *,
    training_dir: Path | None = None,
    probes_metrics: Path | None = None,
    train_rewards: Sequence[str] = (),
    provenance: dict[str, Any] | None = None,
    max_failure_share: float = DEFAULT_MAX_FAILURE_SHARE,
    truth_baseline: pl.DataFrame | None = None,
    judged: str | None = None,
    alarm_alpha: float = training.ALARM_ALPHA,
) -> dict[str, Any]:
    """Validate the inputs; write metrics.json, plots and the report under out_dir; return
    the metrics. `training_dir`: the training histories (`train_rewards`: the judges meant to
    have one; `alarm_alpha`: theirs); bias panels from `probes_metrics` if it exists, else
    "not run"; `provenance` ends the report, out of metrics.json; `judged`: how the scores
    stage grouped natural and known-truth candidates (`scores.populations`)."""
    out_dir = Path(out_dir)
    tasks = validate(tasks, TasksSchema, "tasks table")
    rollouts = validate(rollouts, RolloutsSchema, "rollouts table")
    scores = validate(scores, ScoresSchema, "scores table")
    metrics = audit_metrics(
        tasks,
        rollouts,
        scores,
        settings,
        training_dir=training_dir,
        train_rewards=train_rewards,
        max_failure_share=max_failure_share,
        truth_baseline=truth_baseline,
        judged=judged,
        alarm_alpha=alarm_alpha,
        probes=probes_json(probes_metrics),
    )
    headline, _ = split_populations(rollouts, scores)  # the plots show what the headline does
    truth = execution_truth(headline)
    images = write_images(headline, truth, metrics, settings, out_dir / "plots", training_dir)
    write_reports(metrics, scores, rollouts, truth, images, settings, out_dir,
                  probes_metrics=probes_metrics, provenance=provenance)  # fmt: skip
    write_json(out_dir / "metrics.json", metrics)
    logger.info(
        "analysis: %d evaluators, %d tasks, %d score rows -> %s",
        len(metrics["evaluators"]),
        metrics["n_tasks"],
        metrics["n_score_rows"],
        out_dir,
    )
    return metrics


def probes_json(path: Path | None) -> dict[str, Any] | None:
    """The probes stage's metrics (rules 5 and 6 of the rulebook), None where it has not run."""
    if path is None or not Path(path).exists():
        return None
    return json.loads(Path(path).read_text(encoding="utf-8"))


def analyse_stage(
    tasks: pl.DataFrame,
    rollouts: pl.DataFrame,
    scores: pl.DataFrame,
    settings: Settings,
    out_dir: Path,
    *,
    root: Path,
    training_dir: Path | None = None,
    probes_metrics: Path | None = None,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The analysis stage as its settings configure it: `run_analysis` with the analysis
    section, the judges trained (`train.rewards`) and their alarm's alpha (`train.alarm_alpha`),
    the failure budget, the truth baseline
    (`analysis.truth_baseline`, relative to `root`) and how the scores stage grouped the
    candidates (`scores.populations`). The analysis flow and the Python API
    (`judgelab.api.analyse`) both run the stage through it."""
    baseline = settings.analysis.truth_baseline
    return run_analysis(
        tasks,
        rollouts,
        scores,
        settings.analysis,
        out_dir,
        training_dir=training_dir,
        probes_metrics=probes_metrics,
        train_rewards=settings.train.rewards,
        provenance=provenance,
        max_failure_share=settings.scores.max_failure_share,
        truth_baseline=read_baseline(root / baseline) if baseline else None,
        judged=settings.scores.populations,
        alarm_alpha=settings.train.alarm_alpha,
    )


def write_images(
    scores: pl.DataFrame,
    truth: Truth,
    metrics: dict[str, Any],
    settings: AnalysisSettings,
    plots_dir: Path,
    training_dir: Path | None,
) -> dict[str, Path]:
    """The plot CSVs and PNGs; returns the report's images, {label: png path}."""
    written = write_plots(
        scores, truth, metrics["evaluators"], settings.bins, plots_dir, settings.praise_threshold
    )
    images = {label: path for label, path in written.items() if path.suffix == ".png"}
    forest = plots_dir / "png" / "decision.png"
    if plot_forest(metrics, forest_label(metrics), forest):  # the decision's picture, first
        images = {DECISION_IMAGE: forest, **images}
    shares = plots_dir / "png" / "split_share.png"
    if plot_split_share(metrics, shares, plots_dir / "split_share.csv"):
        images[SPLIT_SHARE_IMAGE] = shares
    if training_dir is not None:
        write_csv(training.curves_frame(training_dir), plots_dir / "training_curves.csv")
        curves = plots_dir / "png" / "training_curves.png"
        if plot_curves(training_dir, curves):
            images["training curves"] = curves
    return images


def write_reports(
    metrics: dict[str, Any],
    scores: pl.DataFrame,
    rollouts: pl.DataFrame,
    truth: Truth,
    images: dict[str, Path],
    settings: AnalysisSettings,
    out_dir: Path,
    *,
    probes_metrics: Path | None,
    provenance: dict[str, Any] | None,
) -> None:
    """report.md and report.html: latency (the report only: timings differ between
    identical runs), the worst false praise and the probes' bias panels beside the metrics."""
    latency = latency_summary(scores)
    examples = worst_false_praise(scores, rollouts, truth, N_EXAMPLES, settings.praise_threshold)
    sections = [
        *split_share_section(metrics),
        *known_truth_section(metrics),
        bias_section(probes_metrics),
        *writers_section(metrics),
        *recheck_section(metrics),
    ]
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
