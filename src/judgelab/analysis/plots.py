"""Plot data (CSVs for `dvc plots`) and PNG charts of the analysis.

Contract:
- `score_distribution` / `judge_vs_truth` / `judge_comparison` are pure: DataFrames in,
  DataFrame out, deterministic row order.
  * score_distribution.csv: evaluator, bin, bin_low, bin_high, truth ("pass" | "fail" |
    "unknown"), count: histogram of every *scored* row (each repeat counts) in `bins` equal
    bins over [0, 1]; the last bin includes 1.0. Every bin is listed for each truth label the
    evaluator has, zeros included, so the CSV's shape does not depend on the data.
  * judge_vs_truth.csv: evaluator, task_id, candidate_id, score (mean of scored repeats),
    passed (1/0): candidates that have both an execution result and a score.
  * judge_comparison.csv: evaluator, metric, value, ci_low, ci_high for pairwise accuracy and
    false-praise rate.
- `write_plots` writes those CSVs under `plots_dir` and, under `plots_dir/png` (one DVC out),
  one histogram PNG per evaluator and a comparison bar chart, atomically (judgelab.io), with
  matplotlib's Agg backend; it returns the written paths.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from judgelab.analysis.truth import Truth, candidate_scores  # noqa: E402
from judgelab.io import atomic_path  # noqa: E402

logger = logging.getLogger(__name__)

TRUTH_LABELS = ("pass", "fail", "unknown")
COMPARED = ("false_praise_rate", "pairwise_accuracy")
_COLORS = {"pass": "#2a9d8f", "fail": "#e76f51", "unknown": "#8d99ae"}
_PNG_METADATA: dict[str, Any] = {"Software": None}  # no version string: same bytes each run


def safe_name(name: str) -> str:
    """A file-name-safe form of an evaluator name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


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


def save_figure(fig: Any, path: Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata=_PNG_METADATA)
    plt.close(fig)


def write_csv(frame: pl.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        frame.write_csv(tmp)


def plot_histogram(
    dist: pl.DataFrame, name: str, bins: int, path: Path, praise_threshold: float | None = None
) -> None:
    """Stacked histogram of one evaluator's scores, coloured by execution truth."""
    fig, ax = plt.subplots(figsize=(6, 3.4))
    centers = (np.arange(bins) + 0.5) / bins
    bottom = np.zeros(bins)
    for label in TRUTH_LABELS:
        part = dist.filter(pl.col("truth") == label).sort("bin")
        if not part.height:
            continue
        counts = part.get_column("count").to_numpy().astype(float)
        ax.bar(
            centers,
            counts,
            width=1.0 / bins,
            bottom=bottom,
            color=_COLORS[label],
            edgecolor="white",
            label={"pass": "passes tests", "fail": "fails tests", "unknown": "no tests"}[label],
        )
        bottom += counts
    if not dist.height:
        ax.text(0.5, 0.5, "no scored rows", ha="center", va="center", transform=ax.transAxes)
    if praise_threshold is not None and dist.height:
        ax.axvline(
            praise_threshold,
            color="black",
            linestyle=":",
            linewidth=1,
            label=f"praise threshold {praise_threshold:g}",
        )
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(0, 1)
    ax.set_xlabel("score")
    ax.set_ylabel("rows")
    ax.set_title(f"{name}: score distribution")
    if dist.height:
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


def plot_comparison(comparison: pl.DataFrame, path: Path) -> None:
    """Bar chart of false-praise rate and pairwise accuracy with 95% CI error bars."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    titles = {
        "false_praise_rate": "false-praise rate (lower is better)",
        "pairwise_accuracy": "pairwise accuracy (0.5 = chance)",
    }
    for ax, metric in zip(axes, COMPARED, strict=True):
        part = comparison.filter((pl.col("metric") == metric) & pl.col("value").is_not_null())
        ax.set_title(titles[metric], fontsize=10)
        ax.set_ylim(0, 1.05)
        if not part.height:
            ax.text(
                0.5, 0.5, "no execution truth", ha="center", va="center", transform=ax.transAxes
            )
            continue
        value = part.get_column("value").to_numpy()
        low = part.get_column("ci_low").fill_null(np.nan).to_numpy()
        high = part.get_column("ci_high").fill_null(np.nan).to_numpy()
        err = np.nan_to_num(np.vstack([value - low, high - value]), nan=0.0).clip(min=0)
        x = np.arange(part.height)
        ax.bar(x, value, yerr=err, capsize=4, color="#457b9d")
        ax.set_xticks(
            x, part.get_column("evaluator").to_list(), rotation=30, ha="right", fontsize=8
        )
        if metric == "pairwise_accuracy":
            ax.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    fig.tight_layout()
    save_figure(fig, path)


def write_plots(
    scores: pl.DataFrame,
    truth: Truth,
    evaluators: dict[str, dict[str, Any]],
    bins: int,
    plots_dir: Path,
    praise_threshold: float | None = None,
) -> dict[str, Path]:
    """Write the CSVs and PNGs under `plots_dir`; return {label: path} in a stable order."""
    written: dict[str, Path] = {}
    dist = score_distribution(scores, truth, bins)
    comparison = judge_comparison(evaluators)
    for label, frame in (
        ("score_distribution.csv", dist),
        ("judge_vs_truth.csv", judge_vs_truth(scores, truth)),
        ("judge_comparison.csv", comparison),
    ):
        path = plots_dir / label
        write_csv(frame, path)
        written[label] = path
    png_dir = plots_dir / "png"
    path = png_dir / "judge_comparison.png"
    plot_comparison(comparison, path)
    written["judge_comparison.png"] = path
    used: set[str] = set()
    for name in sorted(evaluators):
        stem = f"hist_{safe_name(name)}"
        while stem in used:
            stem += "_"
        used.add(stem)
        path = png_dir / f"{stem}.png"
        plot_histogram(dist.filter(pl.col("evaluator") == name), name, bins, path, praise_threshold)
        written[f"hist:{name}"] = path
    logger.info("wrote %d plot files under %s", len(written), plots_dir)
    return written
