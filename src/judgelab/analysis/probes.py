"""Probe analysis: the per-judge bias figures, agreement between judges, plots and a report.

`compute_probe_metrics(candidates, scores, settings, judges)` -> the dict written to
`data/probes/metrics.json` (deterministic: sorted keys, rounded floats, no timings):

- ``judges[name]``, one per probed evaluator:
  * ``rows``: n_rows, unscored_rate, out_of_range_rate (`stats.stats_for_evaluator`);
  * ``calibration``: `truth.truth_metrics` on the known-truth groups (top-1 accuracy, pairwise
    accuracy, ROC-AUC, false-praise rate...), each candidate's score being the mean of its
    permutation views (slot effects average out), clustered by group for the CIs;
  * ``position``: `bias.position_bias` over every group's permutation views;
  * ``perturbation``: `bias.perturbation_bias` per perturbation;
  * ``self_preference``: `bias.self_preference` (the judge's row of the policy x judge matrix
    and its controlled self/family gaps);
  * ``repeat``: repeat stability of the identity view (Shi et al.: share of repeats giving the
    modal top choice) and the mean |score difference| between repeats of a candidate.
- ``agreement``: over candidates every judge scored (mean of permutation views, repeat 0):
  Krippendorff's alpha (interval) across all judges; per judge pair Kendall's tau-b inside each
  group (mean over groups) and Cohen's kappa of scores binarised at ``praise_threshold``.
- ``matrix``: policy -> judge -> mean score (the self-preference heatmap).
Every figure carries ``_ci_low``/``_ci_high``: 95 % percentile CIs of a cluster bootstrap over
groups (`agreement.cluster_ci`, same resampling as the truth metrics).
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from judgelab.analysis import clean_json  # noqa: E402
from judgelab.analysis.agreement import (  # noqa: E402
    cohen_kappa,
    kendall_tau_b,
    krippendorff_alpha_interval,
    repeat_stability,
    top_choice,
    with_ci,
)
from judgelab.analysis.bias import (  # noqa: E402
    PERM,
    perturbation_bias,
    position_bias,
    self_preference,
)
from judgelab.analysis.plots import save_figure  # noqa: E402
from judgelab.analysis.report import fmt_ci  # noqa: E402
from judgelab.analysis.stats import stats_for_evaluator  # noqa: E402
from judgelab.analysis.truth import Truth, resample_weights, truth_metrics  # noqa: E402
from judgelab.config import ProbesSettings  # noqa: E402
from judgelab.io import write_json, write_text  # noqa: E402
from judgelab.scoring import SCORE_COLUMNS  # noqa: E402

log = logging.getLogger(__name__)


def candidate_means(scores: pl.DataFrame) -> pl.DataFrame:
    """group_id, candidate_id, evaluator, passed, score: mean over scored permutation views
    (repeat 0); candidates never scored are left out."""
    return (
        scores.filter(
            pl.col("view").str.starts_with(PERM)
            & (pl.col("repeat") == 0)
            & (pl.col("status") == "scored")
        )
        .group_by("group_id", "candidate_id", "evaluator", "passed")
        .agg(pl.col("score").mean())
        .sort("group_id", "candidate_id", "evaluator")
    )


def calibration(rows: pl.DataFrame, threshold: float, n_boot: int, seed: int) -> dict[str, Any]:
    """truth_metrics on the calibration groups, a group standing for a task."""
    cal = rows.filter(pl.col("probe") == "calibration")
    table = (
        cal.filter(pl.col("view").str.starts_with(PERM))
        .select(pl.col("group_id").alias("task_id"), "candidate_id", "passed")
        .unique()
        .sort("task_id", "candidate_id")
    )
    tasks = sorted(table.filter(pl.col("passed").is_not_null())["task_id"].unique().to_list())
    truth = Truth("execution", table, tasks, None if tasks else "no calibration group")
    means = candidate_means(cal).select(
        pl.col("group_id").alias("task_id"),
        "candidate_id",
        "score",
        pl.lit(1, dtype=pl.UInt32).alias("n_scored_repeats"),
    )
    # One group gives no CI (see agreement.cluster_ci), as for every other probe figure.
    weights = resample_weights(len(tasks), n_boot, seed) if len(tasks) > 1 else None
    return truth_metrics(means, truth, threshold, weights)


def repeats(rows: pl.DataFrame, n_boot: int, seed: int) -> dict[str, Any]:
    ident = rows.filter((pl.col("view") == f"{PERM}0") & (pl.col("status") == "scored"))
    groups = sorted(ident["group_id"].unique().to_list())
    choices: list[list[int]] = []
    diffs: list[list[float]] = []
    for g in groups:
        part = ident.filter(pl.col("group_id") == g)
        reps = sorted(part["repeat"].unique().to_list())
        if len(reps) < 2:
            continue
        ids = sorted(part["candidate_id"].unique().to_list())
        by_rep = {
            r: dict(part.filter(pl.col("repeat") == r).select("candidate_id", "score").iter_rows())
            for r in reps
        }
        full = [r for r in reps if len(by_rep[r]) == len(ids)]
        choices.append([top_choice([by_rep[r][c] for c in ids]) for r in full])
        d = []
        for c in ids:
            s = [by_rep[r][c] for r in reps if c in by_rep[r]]
            d += [abs(a - b) for a, b in itertools.combinations(s, 2)]
        diffs.append(d)
    out: dict[str, Any] = {"n_groups": len(choices)}
    if not choices:
        out["reason"] = "no group has two or more scored repeats (probes.repeats = 0?)"
        return out
    n = len(choices)
    out.update(with_ci("stability", n, lambda idx: repeat_stability(
        [choices[i] for i in idx if len(choices[i]) >= 2]), n_boot, seed))  # fmt: skip

    def mad(idx: np.ndarray) -> float | None:
        vals = [x for i in idx for x in diffs[i]]
        return float(np.mean(vals)) if vals else None

    out.update(with_ci("mean_abs_delta", n, mad, n_boot, seed))
    return out


def agreement(scores: pl.DataFrame, judges: list[str], threshold: float, n_boot: int,
              seed: int) -> dict[str, Any]:  # fmt: skip
    means = candidate_means(scores.filter(pl.col("evaluator").is_in(judges)))
    wide = means.pivot(on="evaluator", index=["group_id", "candidate_id"], values="score")
    present = [j for j in judges if j in wide.columns]
    out: dict[str, Any] = {"judges": present, "n_candidates": wide.height}
    if len(present) < 2 or not wide.height:
        out["reason"] = "needs two or more judges with scores on the same candidates"
        return out
    groups = sorted(wide["group_id"].unique().to_list())
    per_group = [wide.filter(pl.col("group_id") == g) for g in groups]
    n = len(groups)

    def alpha(idx: np.ndarray) -> float | None:
        frame = pl.concat([per_group[i] for i in idx])
        data = frame.select(present).to_numpy().astype(float).T
        return krippendorff_alpha_interval(data)

    out.update(with_ci("krippendorff_alpha", n, alpha, n_boot, seed))
    pairs: dict[str, Any] = {}
    for a, b in itertools.combinations(present, 2):

        def tau(idx: np.ndarray, a: str = a, b: str = b) -> float | None:
            vals = []
            for i in idx:
                f = per_group[i].filter(pl.col(a).is_not_null() & pl.col(b).is_not_null())
                t = kendall_tau_b(f[a].to_list(), f[b].to_list())
                if t is not None:
                    vals.append(t)
            return float(np.mean(vals)) if vals else None

        def kappa(idx: np.ndarray, a: str = a, b: str = b) -> float | None:
            f = pl.concat([per_group[i] for i in idx]).filter(
                pl.col(a).is_not_null() & pl.col(b).is_not_null()
            )
            return cohen_kappa((f[a] >= threshold).to_list(), (f[b] >= threshold).to_list())

        pair: dict[str, Any] = {}
        pair.update(with_ci("kendall_tau", n, tau, n_boot, seed))
        pair.update(with_ci("cohen_kappa", n, kappa, n_boot, seed))
        pairs[f"{a}|{b}"] = pair
    out["pairs"] = pairs
    return out


def compute_probe_metrics(
    candidates: pl.DataFrame,
    scores: pl.DataFrame,
    settings: ProbesSettings,
    judge_models: dict[str, tuple[str, str]],
) -> dict[str, Any]:
    """Every probe figure (module docstring). `judge_models`: evaluator -> (model, family)."""
    boot, seed = settings.bootstrap, settings.seed
    judges = sorted(scores["evaluator"].unique().to_list()) if scores.height else []
    result: dict[str, Any] = {}
    matrix: dict[str, dict[str, Any]] = {}
    for name in judges:
        rows = scores.filter(pl.col("evaluator") == name)
        model, family = judge_models.get(name, (name, "unknown"))
        base = stats_for_evaluator(rows.select(list(SCORE_COLUMNS)))
        selfp = self_preference(
            rows.filter(pl.col("probe") == "self_preference"), model, family, boot, seed
        )
        for policy, cell in selfp.get("matrix", {}).items():
            matrix.setdefault(policy, {})[name] = cell
        result[name] = {
            "judge_model": model,
            "judge_family": family,
            "rows": {
                k: base[k] for k in ("n_rows", "n_scored", "unscored_rate", "out_of_range_rate")
            },  # fmt: skip
            "calibration": calibration(rows, settings.praise_threshold, boot, seed),
            "position": position_bias(rows, boot, seed),
            "perturbation": perturbation_bias(
                rows.filter(pl.col("probe") == "calibration"), settings.tolerance, boot, seed
            ),
            "self_preference": selfp,
            "repeat": repeats(rows, boot, seed),
        }
    return clean_json(
        {
            "judges": result,
            "agreement": agreement(scores, judges, settings.praise_threshold, boot, seed),
            "matrix": matrix,
            "n_groups": candidates["group_id"].n_unique() if candidates.height else 0,
            "n_candidates": candidates.height,
            "n_score_rows": scores.height,
            "settings": settings.model_dump(mode="json"),
        }
    )


# ------------------------------------------------------------------------------ plots


def plot_heatmap(matrix: dict[str, dict[str, Any]], judges: list[str], path: Path) -> None:
    """Policy (rows) x judge (columns) mean score."""
    policies = sorted(matrix)
    data = np.array(
        [[(matrix[p].get(j) or {}).get("mean") for j in judges] for p in policies], dtype=float
    ).reshape(len(policies), len(judges))
    fig, ax = plt.subplots(
        figsize=(max(5.0, 1.6 + 1.4 * len(judges)), 1.6 + 0.6 * max(1, len(policies)))
    )
    if not data.size:
        ax.text(0.5, 0.5, "no self-preference group", ha="center", va="center",
                transform=ax.transAxes)  # fmt: skip
        ax.set_axis_off()
        save_figure(fig, path)
        return
    im = ax.imshow(np.ma.masked_invalid(data), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(judges)), judges, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(policies)), [f"written by {p}" for p in policies], fontsize=8)
    for (i, j), v in np.ndenumerate(data):
        if np.isfinite(v):
            color = "black" if v > 0.6 else "white"  # readable on viridis' light end
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", color=color, fontsize=8)
    ax.set_title("self-preference: mean score\n(row: who wrote it, column: judge)", fontsize=9)
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    save_figure(fig, path)


def plot_slot_bias(judges: dict[str, Any], path: Path) -> None:
    """Grouped bars: slot bias (mean score at slot j minus the mean over slots), 95 % CIs."""
    names = sorted(judges)
    k = max((len(judges[n]["position"].get("slots", {})) for n in names), default=0)
    fig, ax = plt.subplots(figsize=(2 + 1.5 * max(1, len(names)), 3.6))
    width = 0.8 / max(1, k)
    for j in range(k):
        vals, errs = [], []
        for n in names:
            s = judges[n]["position"].get("slots", {}).get(str(j), {})
            v = s.get("bias")
            vals.append(np.nan if v is None else v)
            lo, hi = s.get("bias_ci_low"), s.get("bias_ci_high")
            errs.append((0.0 if v is None or lo is None else v - lo,
                         0.0 if v is None or hi is None else hi - v))  # fmt: skip
        x = np.arange(len(names)) + (j - (k - 1) / 2) * width
        err = np.array(errs).T.clip(min=0) if errs else None
        ax.bar(x, vals, width, yerr=err, capsize=3, label=f"slot {j + 1}")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("score at slot - mean over slots")
    ax.set_title("slot bias (0 = no position bias)", fontsize=10)
    if k:
        ax.legend(fontsize=7, ncol=min(k, 4))
    fig.tight_layout()
    save_figure(fig, path)


# ----------------------------------------------------------------------------- report

COLUMNS = (
    ("unscored", "rows", "unscored_rate"),
    ("top-1 acc.", "calibration", "top1_accuracy"),
    ("pairwise acc.", "calibration", "pairwise_accuracy"),
    ("ROC-AUC", "calibration", "roc_auc"),
    ("false praise", "calibration", "false_praise_rate"),
    ("position consistency", "position", "position_consistency"),
    ("pref. fairness", "position", "preference_fairness"),
    ("mean abs Δscore", "position", "mean_abs_delta"),
    ("self gap", "self_preference", "self_gap"),
    ("family gap", "self_preference", "family_gap"),
    ("repeat stability", "repeat", "stability"),
)


def render_probe_report(metrics: dict[str, Any], images: dict[str, str]) -> str:
    judges = metrics["judges"]
    lines = [
        "# judgelab bias probes",
        "",
        f"{metrics['n_groups']} probe groups, {metrics['n_candidates']} candidates, "
        f"{metrics['n_score_rows']} judge rows. Every figure: value [95 % CI, cluster "
        "bootstrap over groups]. Preference fairness < 0 favours early slots, > 0 late ones.",
        "",
        "## Comparison",
        "",
        "| judge | " + " | ".join(c[0] for c in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 1) + "|",
    ]
    for name in sorted(judges):
        cells = [fmt_ci(judges[name].get(sec, {}), key) for _, sec, key in COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Verbosity and superficial cues",
        "",
        "Effect: mean Δscore of perturbed candidates minus that of unperturbed controls (the "
        "tests' verdict is unchanged). Robustness rate (CALM): share of perturbed candidates "
        f"whose score moved by at most {metrics['settings']['tolerance']}.",
        "",
        "| judge | perturbation | effect | robustness rate | slot-1 bias |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(judges):
        slot1 = judges[name]["position"].get("slots", {}).get("0", {})
        for pert, v in sorted(judges[name]["perturbation"].items()):
            lines.append(
                f"| {name} | {pert} | {fmt_ci(v, 'effect')} | {fmt_ci(v, 'robustness_rate')} "
                f"| {fmt_ci(slot1, 'bias')} |"
            )
    ag = metrics.get("agreement", {})
    lines += ["", "## Agreement between judges", ""]
    if ag.get("reason"):
        lines.append(ag["reason"])
    else:
        lines.append(f"Krippendorff's α (interval): {fmt_ci(ag, 'krippendorff_alpha')}")
        lines += ["", "| pair | Kendall's τ | Cohen's κ |", "|---|---|---|"]
        for pair, v in sorted(ag.get("pairs", {}).items()):
            lines.append(
                f"| {pair.replace('|', ' vs ')} | {fmt_ci(v, 'kendall_tau')} | "
                f"{fmt_ci(v, 'cohen_kappa')} |"
            )
    for label, path in images.items():
        lines += ["", f"![{label}]({path})"]
    for name in sorted(judges):
        j = judges[name]
        lines += ["", f"## {name} ({j['judge_model']}, family {j['judge_family']})", ""]
        lines.append(f"- rows: {j['rows']['n_rows']}, unscored rate {j['rows']['unscored_rate']}")
        pos = j["position"]
        slots = pos.get("slots", {})
        slot_txt = ", ".join(f"slot {int(s) + 1}: {fmt_ci(v, 'bias')}" for s, v in slots.items())
        lines.append(f"- slot bias: {slot_txt or pos.get('reason', 'n/a')}")
        for pert, v in sorted(j["perturbation"].items()):
            lines.append(
                f"- {pert}: effect {fmt_ci(v, 'effect')}, robustness rate "
                f"{fmt_ci(v, 'robustness_rate')} ({v.get('n_treated', 0)} treated)"
            )
        lines.append(
            f"- repeat: stability {fmt_ci(j['repeat'], 'stability')}, mean |Δ| "
            f"{fmt_ci(j['repeat'], 'mean_abs_delta')}"
        )
    return "\n".join(lines) + "\n"


def run_probe_analysis(
    candidates: pl.DataFrame,
    scores: pl.DataFrame,
    settings: ProbesSettings,
    judge_models: dict[str, tuple[str, str]],
    out_dir: Path,
) -> dict[str, Any]:
    """metrics.json, plots/*.png and report.md under out_dir; returns the metrics."""
    metrics = compute_probe_metrics(candidates, scores, settings, judge_models)
    png = Path(out_dir) / "plots"
    judges = sorted(metrics["judges"])
    plot_heatmap(metrics["matrix"], judges, png / "self_preference.png")
    plot_slot_bias(metrics["judges"], png / "slot_bias.png")
    images = {"self-preference heatmap": "plots/self_preference.png",
              "slot bias": "plots/slot_bias.png"}  # fmt: skip
    write_text(Path(out_dir) / "report.md", render_probe_report(metrics, images))
    write_json(Path(out_dir) / "metrics.json", metrics)
    log.info("probes: %d judges, %d rows -> %s", len(judges), scores.height, out_dir)
    return metrics
