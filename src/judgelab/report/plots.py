"""PNG charts and plot CSVs of the analysis stage.

`write_plots` writes the tables of `judgelab.analysis.plot_data` as CSVs under `plots_dir` (for
`dvc plots`) and, under `plots_dir/png` (one DVC out), one histogram PNG per evaluator and a
comparison bar chart, atomically (judgelab.io), with matplotlib's Agg backend; it returns the
written paths. `save_figure` is the one PNG writer of every report (same bytes each run).
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

from judgelab.analysis.plot_data import (  # noqa: E402
    COMPARED,
    TRUTH_LABELS,
    judge_comparison,
    judge_vs_truth,
    score_distribution,
)
from judgelab.analysis.truth import Truth  # noqa: E402
from judgelab.io import atomic_path  # noqa: E402

logger = logging.getLogger(__name__)

_COLORS = {"pass": "#2a9d8f", "fail": "#e76f51", "unknown": "#8d99ae"}
_PNG_METADATA: dict[str, Any] = {"Software": None}  # no version string: same bytes each run


def safe_name(name: str) -> str:
    """A file-name-safe form of an evaluator name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "_"


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
        "false_praise_absolute": "false praise, absolute (lower is better)",
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


def plot_forest(metrics: dict[str, Any], label: str, path: Path) -> bool:
    """Each judge's primary (`metrics["decision"]["primary"]`) with its 95 % CI, best on top,
    n beside it; rejected judges grey; the tests' value and chance as vertical lines. False,
    and nothing written, when no judge has the figure."""
    decision = metrics.get("decision") or {}
    key = decision.get("primary")
    evs = metrics.get("evaluators") or {}
    rows = [
        (n, ev.get("truth") or {}) for n, ev in evs.items() if ev.get("protocol") != "execution"
    ]
    rows = sorted(((n, t) for n, t in rows if key and t.get(key) is not None),
                  key=lambda r: r[1][key])  # fmt: skip
    if not rows:
        return False
    # grey: rejected, or a format gate (never the reward alone)
    rejected = {**(decision.get("rejected") or {}), **(decision.get("format_gates") or {})}
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.4))
    for y, (name, t) in enumerate(rows):
        color = "#8d99ae" if name in rejected else "#1d3557"
        low, high = t.get(f"{key}_ci_low"), t.get(f"{key}_ci_high")
        if low is not None and high is not None:
            ax.plot([low, high], [y, y], color=color, linewidth=2)
        ax.plot([t[key]], [y], "o", color=color)
    ax.set_yticks(range(len(rows)), [
        f"{n}{' (rejected)' if n in rejected else ''}  n = {t.get(f'{key}_n_groups')}"
        for n, t in rows
    ], fontsize=8)  # fmt: skip
    ax.axvline(decision.get("chance", 0.0), color="grey", linestyle="--", linewidth=1)
    if decision.get("tests") is not None:
        ax.axvline(decision["tests"], color=_COLORS["pass"], linewidth=1)
        ax.text(decision["tests"], len(rows) - 0.4, "tests", color=_COLORS["pass"], fontsize=8,
                ha="right")  # fmt: skip
    ax.set_title(label, fontsize=10)
    ax.set_ylim(-0.6, len(rows) - 0.2)
    fig.tight_layout()
    save_figure(fig, path)
    return True


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
