"""The analysis stage's figures: which evaluator to trust, how each scores, and whether it
praises code that fails its tests. This package computes dicts and tables only; everything that
writes Markdown, HTML, plots or README blocks is in `judgelab.report`, which imports it.

`compute_metrics(tasks, rollouts, scores, settings)` computes per-evaluator statistics
(`stats`) and metrics against execution truth (`truth`), as written to metrics.json by
`judgelab.report.outputs.run_analysis`; `audit_metrics` adds what the stage knows beyond the
three tables (failed judges, a judge-only audit's agreement, training):

- `{"evaluators": {name: {...stats, "truth": {...},
  "truth_parseable": {...}}}, "power": {...}, "n_tasks", "n_candidates", "n_score_rows",
  "execution_truth": {...}, "settings": {...}}` (`truth_parseable`: the same figures on
  parseable code only, `truth.Truth.parseable`; `execution_truth` counts each execution
  outcome; `power`: every pair of judges compared on `analysis.primary`, Holm-corrected, and
  how many tasks it takes to separate each pair: `analysis.power`).
  Deterministic for identical inputs and settings: sorted keys, floats rounded to 6 decimals,
  NaN written as null, no timings or wall-clock values (latency goes to the report only).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from judgelab.analysis import training
from judgelab.analysis.decision import decide
from judgelab.analysis.fidelity import candidate_scores, truth_metrics
from judgelab.analysis.judge_only import judge_agreement
from judgelab.analysis.power import power_analysis
from judgelab.analysis.recheck import truth_recheck
from judgelab.analysis.rulebook import rulebook
from judgelab.analysis.split_share import split_share
from judgelab.analysis.stats import CIRule, clean_json, evaluator_stats, resample_weights
from judgelab.analysis.truth import execution_truth
from judgelab.analysis.writers import known_truth_block, split_populations, writer_blocks
from judgelab.config import AnalysisSettings
from judgelab.scoring.failures import loud_failures

__all__ = ["audit_metrics", "compute_metrics"]

logger = logging.getLogger(__name__)


def compute_metrics(
    tasks: pl.DataFrame,
    rollouts: pl.DataFrame,
    scores: pl.DataFrame,
    settings: AnalysisSettings,
    judged: str | None = None,
    probes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every statistic and truth metric, cleaned for JSON; no files written. `probes`: the
    probes stage's metrics, when it has run (rules 5 and 6 of the rulebook). Where the
    candidates include known-truth contrast groups, the headline (evaluators, power, decision)
    is the natural population's and the contrast groups' figures are `known_truth`; `judged`
    says whether the two were judged in calls of their own ("apart") or in one ("together",
    `scores.populations`), None when unknown."""
    all_scores = scores
    scores, known = split_populations(rollouts, all_scores)
    truth = execution_truth(scores, settings.truth)
    if truth.reason:
        logger.warning("truth metrics unavailable: %s", truth.reason)
    parseable = truth.parseable()
    evaluators = evaluator_stats(scores)
    rule = CIRule.of(settings)
    weights = resample_weights(len(truth.tasks), rule.n_boot, rule.seed)
    parseable_weights = resample_weights(len(parseable.tasks), rule.n_boot, rule.seed)
    for name, ev in evaluators.items():
        cand = candidate_scores(scores, name)
        for key, t, w in (
            ("truth", truth, weights),
            ("truth_parseable", parseable, parseable_weights),
        ):
            ev[key] = truth_metrics(cand, t, settings.praise_threshold, w, rule, settings.advantage)
    power = power_analysis(scores, truth, evaluators, settings.power, rule, settings.primary,
                           settings.advantage, settings.margin)  # fmt: skip
    judges = sorted(n for n, ev in evaluators.items() if ev.get("protocol") != "execution")
    shares = split_share(scores, truth, judges, weights, rule, settings.advantage,
                         settings.expected_split_share)  # fmt: skip
    population = _population(scores, known, judged)
    metrics = clean_json(
        {
            "evaluators": evaluators,
            "power": power,
            "rulebook": rulebook(scores, truth, judges, settings, probes),
            "population": population,
            "split_share": shares,
            "n_tasks": tasks.height,
            "n_candidates": rollouts.height,
            "n_score_rows": all_scores.height,
            "execution_truth": truth.summary(),
            # truth_baseline is named in truth_recheck when set; left out here, an analysis
            # without one writes the metrics it wrote before the setting existed
            "settings": settings.model_dump(
                exclude={"truth_baseline", *(["truth"] if settings.truth is None else [])}
            ),
            **({} if known is None else {"known_truth": known_truth_block(known, settings)}),
            **writer_blocks(rollouts, all_scores, settings),  # only with several writers/origins
        }
    )
    return metrics | {"decision": clean_json(decide(metrics))}


def _population(
    scores: pl.DataFrame, known: pl.DataFrame | None, judged: str | None
) -> dict[str, Any]:
    """What the headline figures are computed on (`population` in metrics.json)."""
    return {
        "headline": "all" if known is None else "natural",
        "judged": judged if known is not None else None,
        "n_candidates": scores.get_column("candidate_id").n_unique() if scores.height else 0,
        "n_tasks": scores.get_column("task_id").n_unique() if scores.height else 0,
    }


def audit_metrics(
    tasks: pl.DataFrame,
    rollouts: pl.DataFrame,
    scores: pl.DataFrame,
    settings: AnalysisSettings,
    *,
    training_dir: Path | None,
    train_rewards: Sequence[str],
    max_failure_share: float,
    truth_baseline: pl.DataFrame | None = None,
    judged: str | None = None,
    alarm_alpha: float = training.ALARM_ALPHA,
    probes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The analysis stage's metrics.json: `compute_metrics` (`judged`: scores.populations;
    `probes`: the probes stage's metrics, for rules 5 and 6),
    the loud judge failures (absent when no judge failed), a judge-only audit's agreement,
    the training figures of `training_dir` (`train_rewards`: the judges configured to have
    one; `alarm_alpha`: `train.alarm_alpha`, the alarm's one alpha), and the re-check of
    `truth_baseline` (`recheck.read_baseline` of `settings.truth_baseline`)."""
    metrics = compute_metrics(tasks, rollouts, scores, settings, judged, probes)
    if truth_baseline is not None:
        source = settings.truth_baseline or "truth baseline"
        metrics["truth_recheck"] = clean_json(truth_recheck(truth_baseline, scores, source))
    if failed := loud_failures(scores, max_failure_share):
        metrics["judge_failures"] = [f.line() for f in failed]
    if not scores.filter(pl.col("protocol") == "execution").height:  # a judge-only audit
        metrics["judge_only"] = clean_json(judge_agreement(scores))
    if training_dir is not None:
        figures = training.training_metrics(training_dir, settings, alarm_alpha)
        metrics["training"] = clean_json(figures)
    if train_rewards:
        metrics["train_rewards"] = list(train_rewards)
    return metrics
