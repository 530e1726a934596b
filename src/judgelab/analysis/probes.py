"""Probe analysis: the per-judge bias figures, agreement between judges, plots and a report.

`compute_probe_metrics(candidates, scores, settings, judges)` -> the dict written to
`data/probes/metrics.json` (deterministic: sorted keys, rounded floats, no timings):

- ``judges[name]``, one per probed evaluator:
  * ``rows``: n_rows, unscored_rate, out_of_range_rate (`stats.stats_for_evaluator`);
  * ``calibration``: `truth.truth_metrics` on the known-truth groups (top-1 accuracy, pairwise
    accuracy, ROC-AUC, false-praise rate...), each candidate's score being the mean of its
    permutation views (slot effects average out), clustered by group for the CIs; with
    `order_consistent_accuracy` (JudgeBench, CodeJudgeBench): over (passing, failing) pairs
    of a group scored in two or more permutation views, the share whose passing candidate
    scores strictly higher in every view (`order_consistent_pairs` of `order_pairs`);
  * ``position``: `bias.position_bias` over every group's permutation views (views at
    ``probes.temperature``, 0 by default);
  * ``perturbation``: `bias.perturbation_bias` per perturbation;
  * ``self_preference``: `bias.self_preference` (the judge's row of the policy x judge matrix
    and its self/family gaps on candidates matched on task and test verdict);
  * ``noise_floor`` (on the groups of the position figures) and ``noise_floor_perturbation``
    (on the perturbed known-truth groups): `bias.noise_floor` between the calls of the
    identity view at ``probes.repeat_temperature`` (repeats 1.., and repeat 0 too when the two
    temperatures are equal), with repeat stability; `floor_for` marks a floor ``unusable``
    (measured at another temperature than the order views, or from fewer than
    FLOOR_MIN_CALLS calls of a group) and then no figure gets one (``noise_floor_reason``
    says why). Beside each order and perturbation figure sits
    ``<figure>_noise_floor``, the value a judge with no position or perturbation bias but this
    much noise shows: position consistency, top-choice agreement and mean |delta| beside their
    namesakes, pair instability beside preference fairness, score noise (mean |delta|) beside
    the slot effect and the perturbation effect, the robustness rate beside its namesake.
  * ``attacks``: `attacks.attack_bias` per configured attack (success rate, baseline, score
    shift against the control, stability of semantics-preserving edits);
  * ``cost`` (when the calls table is given): `cost.cost_metrics`, tokens and money per
    correctly ordered pass/fail pair (the time figures go to the report only).
- ``agreement``: over candidates every judge scored (mean of permutation views, repeat 0):
  Krippendorff's alpha (interval) across all judges; per judge pair Kendall's tau-b inside each
  group (mean over groups) and Cohen's kappa of scores binarised at ``praise_threshold``.
- ``matrix``: policy -> judge -> mean score (the self-preference heatmap).
Every figure carries ``_ci_low``/``_ci_high``: 95 % percentile CIs of a cluster bootstrap over
groups (`agreement.cluster_ci`, same resampling as the truth metrics), only when the figure
rests on at least ``min_ci_groups`` groups; below that both are null and ``<figure>_ci_reason`` says
why ("n = 2 groups: too few for a CI (minimum 5)").
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
)
from judgelab.analysis.attacks import attack_bias, attack_lines, plot_attacks  # noqa: E402
from judgelab.analysis.bias import (  # noqa: E402
    PERM,
    PERT,
    figure_with_ci,
    noise_floor,
    perturbation_bias,
    position_bias,
    position_groups,
    self_preference,
    view_scores,
)
from judgelab.analysis.cost import (  # noqa: E402
    JudgeCosting,
    cost_lines,
    cost_metrics,
    cost_timings,
)
from judgelab.analysis.plots import save_figure  # noqa: E402
from judgelab.analysis.report import fmt_ci, fmt_num  # noqa: E402
from judgelab.analysis.stats import stats_for_evaluator  # noqa: E402
from judgelab.analysis.truth import Truth, resample_weights, truth_metrics  # noqa: E402
from judgelab.config import ProbesSettings  # noqa: E402
from judgelab.io import write_json, write_text  # noqa: E402
from judgelab.schemas import ScoresSchema, columns  # noqa: E402

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


def calibration(
    rows: pl.DataFrame, threshold: float, n_boot: int, seed: int, *, min_groups: int
) -> dict[str, Any]:
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
    weights = resample_weights(len(tasks), n_boot, seed) if n_boot else None
    out = truth_metrics(means, truth, threshold, weights, min_groups=max(min_groups, 2))
    out.update(order_consistent(cal, table, n_boot, seed, min_groups=min_groups))
    return out


def order_consistent(
    cal: pl.DataFrame, table: pl.DataFrame, n_boot: int, seed: int, *, min_groups: int
) -> dict[str, Any]:
    """Order-consistent pairwise accuracy of the calibration groups (module docstring): a
    (passing, failing) pair counts only when both were scored in at least two permutation
    views, and is right only when the passing one scores strictly higher in every one."""
    passed = {r["candidate_id"]: r["passed"] for r in table.iter_rows(named=True)}
    per_group: list[tuple[float, float]] = []
    for _group, views in sorted(view_scores(cal, PERM).items()):
        ids = sorted(set().union(*views.values()))
        right = total = 0.0
        for p in (c for c in ids if passed.get(c) is True):
            for f in (c for c in ids if passed.get(c) is False):
                both = [v for v in views.values() if p in v and f in v]
                if len(both) < 2:
                    continue
                total += 1
                right += float(all(v[p][0] > v[f][0] for v in both))
        if total:
            per_group.append((right, total))
    num = np.array([r for r, _ in per_group])
    den = np.array([t for _, t in per_group])

    def stat(idx: np.ndarray) -> float | None:
        d = den[idx].sum()
        return float(num[idx].sum() / d) if d else None

    out = figure_with_ci("order_consistent_accuracy", len(per_group), stat, n_boot, seed,
                         min_groups)  # fmt: skip
    out["order_consistent_pairs"] = int(num.sum())
    out["order_pairs"] = int(den.sum())
    return out


def _perturbed_groups(rows: pl.DataFrame) -> list[str]:
    pert = rows.filter(pl.col("view").str.starts_with(PERT))
    return sorted(pert["group_id"].unique().to_list()) if pert.height else []


def noise_repeats(settings: ProbesSettings) -> list[int]:
    """The calls of the identity view at the repeat temperature: repeats 1.., and repeat 0
    too when the order views run at that same temperature."""
    same = settings.temperature == settings.repeat_temperature
    return ([0] if same else []) + list(range(1, settings.repeats + 1))


# order/perturbation figure -> the noise-floor figure shown beside it
FLOOR_OF = {
    "position_consistency": "position_consistency",
    "top_choice_agreement": "top_choice_agreement",
    "preference_fairness": "pair_instability",
    "slot_effect": "mean_abs_delta",
    "mean_abs_delta": "mean_abs_delta",
}
PERTURBATION_FLOOR_OF = {"effect": "mean_abs_delta", "robustness_rate": "robustness_rate"}


# A floor rests on at least this many calls of each group: two calls give one difference,
# which says little about the noise (issue 28: three or more repeats).
FLOOR_MIN_CALLS = 3


def with_floor(block: dict[str, Any], floor: dict[str, Any], pairs: dict[str, str]) -> None:
    """block[f"{figure}_noise_floor"] = floor[its noise-floor figure] (None when unknown or
    when the floor is not usable: `floor["unusable"]` says why, copied as
    `noise_floor_reason`)."""
    why = floor.get("unusable")
    for fig, floor_fig in pairs.items():
        if fig in block:
            block[f"{fig}_noise_floor"] = None if why else floor.get(floor_fig)
    if why:
        block["noise_floor_reason"] = why


def floor_for(rows: pl.DataFrame, settings: ProbesSettings, groups: list[str],
              min_ci_groups: int) -> dict[str, Any]:  # fmt: skip
    """The noise floor on `groups` (those of the figures it sits beside), with `unusable`
    set when it was measured at another temperature than the order views or from fewer than
    FLOOR_MIN_CALLS calls of some group."""
    floor = noise_floor(rows, noise_repeats(settings), settings.tolerance, settings.bootstrap,
                        settings.seed, min_groups=min_ci_groups, groups=groups)  # fmt: skip
    floor["temperature"] = settings.repeat_temperature
    if settings.repeat_temperature != settings.temperature:
        floor["unusable"] = (
            f"the repeats ran at temperature {settings.repeat_temperature}, the order views "
            f"at {settings.temperature}: noise at another temperature is no floor for them"
        )
    elif floor["n_groups"] and floor["calls_per_group"] < FLOOR_MIN_CALLS:
        floor["unusable"] = (
            f"{floor['calls_per_group']} calls of the identity view in some group; a floor "
            f"needs {FLOOR_MIN_CALLS} (probes.repeats >= {FLOOR_MIN_CALLS - 1})"
        )
    elif not floor["n_groups"]:
        floor["unusable"] = floor["reason"]
    return floor


def agreement(scores: pl.DataFrame, judges: list[str], threshold: float, n_boot: int,
              seed: int, *, min_groups: int) -> dict[str, Any]:  # fmt: skip
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

    out.update(figure_with_ci("krippendorff_alpha", n, alpha, n_boot, seed, min_groups))
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
        pair.update(figure_with_ci("kendall_tau", n, tau, n_boot, seed, min_groups))
        pair.update(figure_with_ci("cohen_kappa", n, kappa, n_boot, seed, min_groups))
        pairs[f"{a}|{b}"] = pair
    out["pairs"] = pairs
    return out


def compute_probe_metrics(
    candidates: pl.DataFrame,
    scores: pl.DataFrame,
    settings: ProbesSettings,
    judge_models: dict[str, tuple[str, str]],
    *,
    min_ci_groups: int,
    calls: pl.DataFrame | None = None,
    costing: dict[str, JudgeCosting] | None = None,
) -> dict[str, Any]:
    """Every probe figure (module docstring). `judge_models`: evaluator -> (model, family);
    `min_ci_groups`: the fewest groups a CI may rest on; `calls` (the probe calls table) and
    `costing` (evaluator -> its model's costing) give the cost figures."""
    boot, seed = settings.bootstrap, settings.seed
    kw = {"min_groups": min_ci_groups}
    judges = sorted(scores["evaluator"].unique().to_list()) if scores.height else []
    result: dict[str, Any] = {}
    matrix: dict[str, dict[str, Any]] = {}
    for name in judges:
        rows = scores.filter(pl.col("evaluator") == name)
        model, family = judge_models.get(name, (name, "unknown"))
        base = stats_for_evaluator(rows.select(columns(ScoresSchema).names()))
        selfp = self_preference(
            rows.filter(pl.col("probe") == "self_preference"), model, family, boot, seed, **kw
        )
        for policy, cell in selfp.get("matrix", {}).items():
            matrix.setdefault(policy, {})[name] = cell
        floor = floor_for(rows, settings, sorted(position_groups(rows)), min_ci_groups)
        position = position_bias(rows, boot, seed, **kw)
        with_floor(position, floor, FLOOR_OF)
        calibration_rows = rows.filter(pl.col("probe") == "calibration")
        perturbation = perturbation_bias(calibration_rows, settings.tolerance, boot, seed, **kw)
        pert_floor = floor_for(rows, settings, _perturbed_groups(calibration_rows), min_ci_groups)
        for fig in perturbation.values():
            with_floor(fig, pert_floor, PERTURBATION_FLOOR_OF)
        result[name] = {
            "judge_model": model,
            "judge_family": family,
            "rows": {
                k: base[k] for k in ("n_rows", "n_scored", "unscored_rate", "out_of_range_rate")
            },  # fmt: skip
            "calibration": calibration(rows, settings.praise_threshold, boot, seed, **kw),
            "position": position,
            "perturbation": perturbation,
            "self_preference": selfp,
            "noise_floor": floor,
            "noise_floor_perturbation": pert_floor,
            "attacks": attack_bias(
                rows.filter(pl.col("probe") == "calibration"),
                settings.praise_threshold,
                settings.tolerance,
                boot,
                seed,
                **kw,
            ),
        }
        if calls is not None and costing and name in costing:
            result[name]["cost"] = cost_metrics(
                calls.filter(pl.col("evaluator") == name), rows, costing[name], boot, seed, **kw
            )
    return clean_json(
        {
            "judges": result,
            "agreement": agreement(scores, judges, settings.praise_threshold, boot, seed, **kw),
            "matrix": matrix,
            "n_groups": candidates["group_id"].n_unique() if candidates.height else 0,
            "n_candidates": candidates.height,
            "n_score_rows": scores.height,
            "min_ci_groups": min_ci_groups,
            "temperature": settings.temperature,
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
    ("position consistency (Shi et al.)", "position", "position_consistency"),
    ("pref. fairness", "position", "preference_fairness"),
    ("slot trend (per slot)", "position", "slot_trend"),
    ("top-choice agreement", "position", "top_choice_agreement"),
    ("mean abs Δscore", "position", "mean_abs_delta"),
    ("self gap", "self_preference", "self_gap"),
    ("family gap", "self_preference", "family_gap"),
    ("repeat stability", "noise_floor", "stability"),
)


class _Notes:
    """Numbered footnotes for figures shown without a CI, one per distinct reason."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def mark(self, block: dict[str, Any], key: str) -> str:
        if block.get(key) is None or block.get(f"{key}_ci_low") is not None:
            return ""
        why = block.get(f"{key}_ci_reason") or (block.get("reasons") or {}).get("ci")
        if not why:
            return ""
        if why not in self.reasons:
            self.reasons.append(why)
        return f" †{self.reasons.index(why) + 1}"

    def lines(self) -> list[str]:
        return ["", *(f"†{i}: no CI: {why}." for i, why in enumerate(self.reasons, 1))]


def _fig(block: dict[str, Any], key: str, notes: _Notes) -> str:
    """value [CI] (or value †n: why there is no CI), then the noise floor beside it."""
    mark = notes.mark(block, key)  # without a CI: the value and a footnote with the reason
    text = (fmt_num(block.get(key)) if mark else fmt_ci(block, key)) + mark
    if f"{key}_noise_floor" in block:
        text += f" (floor {fmt_num(block[f'{key}_noise_floor'])})"
    return text


def _p_text(p: float | None) -> str:
    if p is None:
        return ""
    return ", p < 0.001" if p < 0.001 else f", p = {p:.3f}"


def _position_lines(pos: dict[str, Any], notes: _Notes) -> list[str]:
    if pos.get("reason"):
        return [f"- position: {pos['reason']}"]
    winners = ", ".join(
        f"slot {int(s) + 1} ×{c}" for s, c in sorted(pos.get("tied_pair_winner_slots", {}).items())
    )
    driven = (
        pos["n_primacy_preferred"] + pos["n_recency_preferred"] + pos["n_primacy_tied"]
        + pos["n_recency_tied"]
    )  # fmt: skip
    slots = pos.get("slots", {})
    return [
        f"- position ({pos['n_groups']} groups, {pos['n_swapped_pairs']} swapped candidate "
        f"pairs, {pos.get('n_flat_pairs', 0)} of them flat: tied in both orders, left out of "
        f"consistency): position consistency {_fig(pos, 'position_consistency', notes)}, "
        f"preference fairness (Shi et al.) {_fig(pos, 'preference_fairness', notes)}, "
        f"tie-aware {_fig(pos, 'preference_fairness_tie_aware', notes)}",
        f"- position-driven pairs: {driven} of {pos['n_swapped_pairs']}: "
        f"{pos['n_primacy_preferred']} primacy-preferred, {pos['n_recency_preferred']} "
        f"recency-preferred, {pos['n_primacy_tied']} tied in one order while the earlier-shown "
        f"one won in the other, {pos['n_recency_tied']} while the later-shown one won"
        + (f" (winning slots: {winners})" if winners else ""),
        "- mean score by slot: "
        + ", ".join(f"slot {int(j) + 1}: {_fig(v, 'mean', notes)}" for j, v in slots.items())
        + f"; slot trend (the same candidate's score change per slot later): "
        f"{_fig(pos, 'slot_trend', notes)}"
        + _p_text(pos.get("slot_trend_p"))
        + "; each slot against its mirror: "
        + ", ".join(f"slot {int(j) + 1}: {_fig(v, 'effect', notes)}" for j, v in slots.items()),
        f"- top-choice agreement ({pos['n_view_pairs']} view pairs, {pos['n_tied_view_pairs']} "
        f"with a tied top, which never agrees): {_fig(pos, 'top_choice_agreement', notes)}",
        "- slot bias: "
        + ", ".join(f"slot {int(j) + 1}: {_fig(v, 'bias', notes)}" for j, v in slots.items()),
        f"- top rate by slot ({pos['n_top_views']} views with a unique top; "
        f"{pos['n_tied_top_views']} with a tied top left out): "
        + ", ".join(f"slot {int(j) + 1}: {_fig(v, 'top_rate', notes)}" for j, v in slots.items()),
    ]


def render_probe_report(
    metrics: dict[str, Any],
    images: dict[str, str],
    timings: dict[str, dict[str, Any]] | None = None,
) -> str:
    """report.md; `timings` (evaluator -> `cost.cost_timings`) adds time to the cost table."""
    judges = metrics["judges"]
    notes = _Notes()
    st = metrics["settings"]
    lines = [
        "# judgelab bias probes",
        "",
        f"{metrics['n_groups']} probe groups, {metrics['n_candidates']} candidates, "
        f"{metrics['n_score_rows']} judge rows. Every figure: value [95 % CI, cluster bootstrap "
        f"over groups], the CI only when the figure rests on at least {metrics['min_ci_groups']} "
        "groups (†: no CI, the reason under the table).",
        "",
        f"Order and perturbation views ran at judge temperature {st['temperature']}. Beside "
        "each of their figures, (floor x) is the noise floor: the same figure between two calls "
        f"of the identity view at temperature {st['repeat_temperature']}, what a judge with no "
        "position or perturbation bias but that much noise shows (for preference fairness: the "
        "pair instability, the largest |fairness| noise alone gives; for the slot and "
        "perturbation effects: the mean |Δscore| between two calls).",
        "",
        "Position consistency is Shi et al.'s: the share of candidate pairs preferred the same "
        "way in two orders that swap them. Preference fairness < 0 favours early slots, > 0 late "
        "ones; a pair tied in one order and ranked in the other counts half towards the slot "
        "that won. Slot trend: the same candidate's score change per slot later (> 0 favours "
        "later slots; p from a t-test over tasks); read it with the slot means, which show a "
        "pattern that is not a trend. "
        "Top-choice agreement: two orders pick the same unique best candidate.",
        "",
        "## Comparison",
        "",
        "| judge | groups | " + " | ".join(c[0] for c in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 2) + "|",
    ]
    for name in sorted(judges):
        cells = [_fig(judges[name].get(sec, {}), key, notes) for _, sec, key in COLUMNS]
        n = judges[name]["position"].get("n_groups", 0)
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Verbosity and superficial cues",
        "",
        "Effect: mean Δscore of perturbed candidates minus that of unperturbed controls (the "
        "tests' verdict is unchanged); without a scored control there is no effect. Robustness "
        "rate (CALM): share of perturbed candidates whose score moved by at most "
        f"{st['tolerance']}.",
        "",
        "| judge | perturbation | groups | treated / controls | effect | robustness rate |",
        "|---|---|---|---|---|---|",
    ]
    for name in sorted(judges):
        for pert, v in sorted(judges[name]["perturbation"].items()):
            effect = _fig(v, "effect", notes)
            if v.get("effect") is None:
                effect += f" ({(v.get('reasons') or {}).get('effect') or v.get('reason', '')})"
            lines.append(
                f"| {name} | {pert} | {v.get('n_groups', 0)} | {v.get('n_treated', 0)} / "
                f"{v.get('n_control', 0)} | {effect} | {_fig(v, 'robustness_rate', notes)} |"
            )
    attacks = attack_lines(judges, lambda b, k: _fig(b, k, notes), st.get("fail_above"))
    lines += ["", *attacks] if attacks else []
    costs = cost_lines(judges, timings or {})
    lines += ["", *costs] if costs else []
    ag = metrics.get("agreement", {})
    lines += ["", "## Agreement between judges", ""]
    if ag.get("reason"):
        lines.append(ag["reason"])
    else:
        lines.append(
            f"Krippendorff's α (interval, {ag['n_candidates']} candidates): "
            f"{_fig(ag, 'krippendorff_alpha', notes)}"
        )
        lines += ["", "| pair | Kendall's τ | Cohen's κ |", "|---|---|---|"]
        for pair, v in sorted(ag.get("pairs", {}).items()):
            lines.append(
                f"| {pair.replace('|', ' vs ')} | {_fig(v, 'kendall_tau', notes)} | "
                f"{_fig(v, 'cohen_kappa', notes)} |"
            )
    for label, path in images.items():
        lines += ["", f"![{label}]({path})"]
    for name in sorted(judges):
        j = judges[name]
        lines += ["", f"## {name} ({j['judge_model']}, family {j['judge_family']})", ""]
        lines.append(f"- rows: {j['rows']['n_rows']}, unscored rate {j['rows']['unscored_rate']}")
        lines += _position_lines(j["position"], notes)
        for pert, v in sorted(j["perturbation"].items()):
            lines.append(
                f"- {pert} ({v.get('n_groups', 0)} groups, {v.get('n_treated', 0)} treated, "
                f"{v.get('n_control', 0)} controls): effect {_fig(v, 'effect', notes)}, "
                f"robustness rate {_fig(v, 'robustness_rate', notes)}"
            )
        fl = j["noise_floor"]
        if fl.get("reason"):
            lines.append(f"- noise floor: {fl['reason']}")
        else:
            lines.append(
                f"- noise floor (temperature {fl['temperature']}, {fl['n_groups']} groups, "
                f"{fl['n_call_pairs']} call pairs): position consistency "
                f"{_fig(fl, 'position_consistency', notes)}, pair instability "
                f"{_fig(fl, 'pair_instability', notes)}, top-choice agreement "
                f"{_fig(fl, 'top_choice_agreement', notes)}, mean |Δ| "
                f"{_fig(fl, 'mean_abs_delta', notes)}, robustness rate "
                f"{_fig(fl, 'robustness_rate', notes)}, repeat stability "
                f"{_fig(fl, 'stability', notes)}"
            )
    if notes.reasons:
        lines += ["", "## Figures without a CI", *notes.lines()[1:]]
    return "\n".join(lines) + "\n"


def run_probe_analysis(
    candidates: pl.DataFrame,
    scores: pl.DataFrame,
    settings: ProbesSettings,
    judge_models: dict[str, tuple[str, str]],
    out_dir: Path,
    *,
    min_ci_groups: int,
    calls: pl.DataFrame | None = None,
    costing: dict[str, JudgeCosting] | None = None,
) -> dict[str, Any]:
    """metrics.json, plots/*.png and report.md under out_dir; returns the metrics. With the
    probe calls table and the judges' costing, the cost figures too."""
    metrics = compute_probe_metrics(
        candidates, scores, settings, judge_models, min_ci_groups=min_ci_groups,
        calls=calls, costing=costing,
    )  # fmt: skip
    png = Path(out_dir) / "plots"
    judges = sorted(metrics["judges"])
    plot_heatmap(metrics["matrix"], judges, png / "self_preference.png")
    plot_slot_bias(metrics["judges"], png / "slot_bias.png")
    images = {"self-preference heatmap": "plots/self_preference.png",
              "slot bias": "plots/slot_bias.png"}  # fmt: skip
    if settings.attacks:
        plot_attacks(metrics["judges"], png / "attacks.png", settings.fail_above)
        images["attacks"] = "plots/attacks.png"
    timings = {
        name: cost_timings(
            calls.filter(pl.col("evaluator") == name),
            scores.filter(pl.col("evaluator") == name),
            costing[name],
        )
        for name in judges
        if calls is not None and costing and name in costing
    }
    report = render_probe_report(metrics, images, timings)
    write_text(Path(out_dir) / "report.md", report)
    write_json(Path(out_dir) / "metrics.json", metrics)
    log.info("probes: %d judges, %d rows -> %s", len(judges), scores.height, out_dir)
    return metrics
