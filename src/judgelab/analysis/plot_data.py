"""The tables behind the analysis plots (CSVs for `dvc plots`); `judgelab.report.plots` writes
them and draws the PNGs.

Contract: `score_distribution` / `judge_vs_truth` / `judge_comparison` are pure: DataFrames
in, DataFrame out, deterministic row order.
- score_distribution.csv: evaluator, bin, bin_low, bin_high, truth ("pass" | "fail" |
  "unknown"), count: histogram of every *scored* row (each repeat counts) in `bins` equal
  bins over [0, 1]; the last bin includes 1.0. Every bin is listed for each truth label the
  evaluator has, zeros included, so the CSV's shape does not depend on the data.
- judge_vs_truth.csv: evaluator, task_id, candidate_id, score (mean of scored repeats),
  passed (1/0): candidates that have both an execution result and a score.
- judge_comparison.csv: evaluator, metric, value, ci_low, ci_high for pairwise accuracy and
  false-praise rate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.fidelity import candidate_scores
from judgelab.analysis.truth import Truth

TRUTH_LABELS = ("pass", "fail", "unknown")


COMPARED = ("false_praise_absolute", "pairwise_accuracy")


def bin_index(score: np.ndarray, bins: int) -> np.ndarray:
    """Bin of each score in `bins` equal bins over [0, 1]; 1.0 falls in the last bin.
    Rounding first keeps 0.3 in bin 3 despite binary floating point."""
    idx = np.floor(np.round(np.asarray(score, dtype=float) * bins, 9)).astype(int)
    return np.clip(idx, 0, bins - 1)


def _truth_label(truth: Truth) -> pl.DataFrame:
    return truth.table.select(
        "candidate_id",
        pl.when(pl.col("passed").is_null())
        .then(pl.lit("unknown"))
        .when(pl.col("passed"))
        .then(pl.lit("pass"))
        .otherwise(pl.lit("fail"))
        .alias("truth"),
    )


def score_distribution(scores: pl.DataFrame, truth: Truth, bins: int) -> pl.DataFrame:
    """Histogram counts per evaluator, bin and truth label (see module docstring)."""
    schema = {
        "evaluator": pl.String,
        "bin": pl.Int64,
        "bin_low": pl.Float64,
        "bin_high": pl.Float64,
        "truth": pl.String,
        "count": pl.Int64,
    }
    scored = scores.filter(pl.col("status") == "scored").select(
        "evaluator", "candidate_id", "score"
    )
    if not scored.height:
        return pl.DataFrame(schema=schema)
    labelled = scored.join(_truth_label(truth), on="candidate_id", how="left").with_columns(
        pl.col("truth").fill_null("unknown")
    )
    rows: list[dict[str, Any]] = []
    for name in sorted(labelled.get_column("evaluator").unique().to_list()):
        ev = labelled.filter(pl.col("evaluator") == name)
        present = set(ev.get_column("truth").to_list())
        for label in (lab for lab in TRUTH_LABELS if lab in present):
            values = ev.filter(pl.col("truth") == label).get_column("score").to_numpy()
            counts = np.bincount(bin_index(values, bins), minlength=bins)
            for b in range(bins):
                rows.append(
                    {
                        "evaluator": name,
                        "bin": b,
                        "bin_low": round(b / bins, 6),
                        "bin_high": round((b + 1) / bins, 6),
                        "truth": label,
                        "count": int(counts[b]),
                    }
                )
    return pl.DataFrame(rows, schema=schema)


def judge_vs_truth(scores: pl.DataFrame, truth: Truth) -> pl.DataFrame:
    """Per-candidate score next to pass/fail, for every evaluator."""
    schema = {
        "evaluator": pl.String,
        "task_id": pl.String,
        "candidate_id": pl.String,
        "score": pl.Float64,
        "passed": pl.Int64,
    }
    known = truth.table.filter(pl.col("passed").is_not_null()).select("candidate_id", "passed")
    frames = []
    names = sorted(scores.get_column("evaluator").unique().to_list()) if scores.height else []
    for name in names:
        cand = candidate_scores(scores, name).filter(pl.col("score").is_not_null())
        frames.append(
            cand.join(known, on="candidate_id", how="inner").select(
                pl.lit(name).alias("evaluator"),
                "task_id",
                "candidate_id",
                "score",
                pl.col("passed").cast(pl.Int64),
            )
        )
    if not frames:
        return pl.DataFrame(schema=schema)
    return pl.concat(frames).cast(schema).sort("evaluator", "task_id", "candidate_id")  # type: ignore[arg-type]


def judge_comparison(evaluators: dict[str, dict[str, Any]]) -> pl.DataFrame:
    """Pairwise accuracy and false-praise rate with CIs, one row per (evaluator, metric).
    The execution evaluator is the truth itself and is left out."""
    rows = []
    for name in sorted(evaluators):
        if evaluators[name].get("protocol") == "execution":
            continue
        t = evaluators[name].get("truth", {})
        for metric in COMPARED:
            rows.append(
                {
                    "evaluator": name,
                    "metric": metric,
                    "value": t.get(metric),
                    "ci_low": t.get(f"{metric}_ci_low"),
                    "ci_high": t.get(f"{metric}_ci_high"),
                }
            )
    schema = {
        "evaluator": pl.String,
        "metric": pl.String,
        "value": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)
