"""Every truth figure split by who wrote the candidates: by writer, and by origin (a policy's
natural samples vs known-truth contrast groups, `judgelab.rollouts.origins`).

Contract:
- `writer_blocks(rollouts, scores, settings)` takes what the truth figures take and returns
  ``{"writers": {...}}`` for metrics.json, or ``{}`` when the candidates have one writer and
  one origin (then the split is the whole table, already reported).
- ``by_writer`` (more than one writer) and ``by_origin`` (both origins present) each map a
  name to ``{"n_candidates", "n_tasks", "evaluators": {evaluator: truth figures}}`` (a
  writer's block also names its ``origin``, an origin's its ``writers``). The figures are
  `fidelity.truth_metrics` computed on that subset's candidates alone, exactly as the analysis
  computes them on all of them (the table's own figures are the "together" view): execution
  truth from the subset's rows, a bootstrap over the subset's tasks with the analysis seed,
  the same minimum of groups for a CI. Within-group figures therefore compare a subset's
  candidates of a task with one another: a writer whose candidates of a task all pass or
  all fail adds no pair there (mutants alone never do; the contrast origin, reference with
  its mutants, does).
- A scored candidate the rollouts table does not hold has no writer: it is left out of the
  split and counted (``n_candidates_no_writer``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from judgelab.analysis.fidelity import candidate_scores, truth_metrics
from judgelab.analysis.stats import CIRule, resample_weights
from judgelab.analysis.truth import execution_truth
from judgelab.config import AnalysisSettings
from judgelab.rollouts.origins import ORIGINS, origin


def subset_truth(scores: pl.DataFrame, settings: AnalysisSettings) -> dict[str, Any]:
    """Every evaluator's truth figures on the candidates of `scores` (already a subset)."""
    truth = execution_truth(scores, settings.truth)
    weights = resample_weights(len(truth.tasks), settings.bootstrap, settings.seed)
    return {
        name: truth_metrics(
            candidate_scores(scores, name),
            truth,
            settings.praise_threshold,
            weights,
            CIRule.of(settings),
            settings.advantage,
        )
        for name in sorted(scores.get_column("evaluator").unique().to_list())
    }


def _block(scores: pl.DataFrame, ids: list[str], settings: AnalysisSettings) -> dict[str, Any]:
    sub = scores.filter(pl.col("candidate_id").is_in(ids))
    return {
        "n_candidates": sub.get_column("candidate_id").n_unique(),
        "n_tasks": sub.get_column("task_id").n_unique(),
        "evaluators": subset_truth(sub, settings),
    }


def split_populations(
    rollouts: pl.DataFrame, scores: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame | None]:
    """The score rows the headline is computed on, and the known-truth groups' rows: where
    the candidates have both origins, the natural ones (what GRPO trains on) and the contrast
    groups; else every row, and None."""
    if "policy" not in rollouts.columns or not scores.height:
        return scores, None
    writers = rollouts.select("candidate_id", "policy").unique("candidate_id")
    contrast = [cid for cid, w in writers.iter_rows() if origin(w) == "contrast"]
    if not contrast or len(contrast) == writers.height:
        return scores, None
    is_contrast = pl.col("candidate_id").is_in(contrast)
    return scores.filter(~is_contrast), scores.filter(is_contrast)


def known_truth_block(known: pl.DataFrame, settings: AnalysisSettings) -> dict[str, Any]:
    """The known-truth groups' figures (a named secondary): every truth figure on the
    contrast candidates alone, with their own bootstrap and n."""
    ids = known.get_column("candidate_id").unique().sort().to_list()
    return _block(known, ids, settings)


def writer_blocks(
    rollouts: pl.DataFrame, scores: pl.DataFrame, settings: AnalysisSettings
) -> dict[str, Any]:
    """``{"writers": {"by_writer": ..., "by_origin": ...}}``, or ``{}`` with one writer and
    one origin (see the module's contract)."""
    if "policy" not in rollouts.columns:  # a bare candidate list (compute_metrics' callers)
        return {}
    writer_of = dict(rollouts.select("candidate_id", "policy").unique("candidate_id").iter_rows())
    scored = scores.get_column("candidate_id").unique().sort().to_list()
    by_writer: dict[str, list[str]] = {}
    for cid in scored:
        if cid in writer_of:
            by_writer.setdefault(writer_of[cid], []).append(cid)
    by_origin: dict[str, list[str]] = {}
    for writer, ids in by_writer.items():
        by_origin.setdefault(origin(writer), []).extend(ids)
    out: dict[str, Any] = {}
    if len(by_writer) > 1:
        out["by_writer"] = {
            w: {"origin": origin(w), **_block(scores, ids, settings)}
            for w, ids in sorted(by_writer.items())
        }
    if len(by_origin) > 1:
        out["by_origin"] = {
            o: {
                "writers": sorted(w for w in by_writer if origin(w) == o),
                **_block(scores, by_origin[o], settings),
            }
            for o in ORIGINS
        }
    if not out:
        return {}
    out["n_candidates_no_writer"] = sum(1 for cid in scored if cid not in writer_of)
    return {"writers": out}
