"""The probes stage's outputs: metrics.json, plots/*.png and report.md, from
`analysis.probes.compute_probe_metrics`.

The report gives every figure as value [95 % CI], the CI only from the configured minimum of
groups (†: no CI, the reason under the table), with the noise floor beside the order and
perturbation figures.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from judgelab.analysis.cost import JudgeCosting, cost_timings  # noqa: E402
from judgelab.analysis.probes import compute_probe_metrics  # noqa: E402
from judgelab.analysis.stats import CIRule  # noqa: E402
from judgelab.config import ProbesSettings  # noqa: E402
from judgelab.io import write_json, write_text  # noqa: E402
from judgelab.report.attacks import attack_lines, plot_attacks  # noqa: E402
from judgelab.report.cost import cost_lines  # noqa: E402
from judgelab.report.format import fmt_ci, fmt_num, plural  # noqa: E402
from judgelab.report.plots import save_figure  # noqa: E402

log = logging.getLogger(__name__)


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


COLUMNS = (
    ("unscored", "rows", "unscored_rate"),
    ("top-1 acc.", "calibration", "top1_accuracy"),
    ("pairwise acc.", "calibration", "pairwise_accuracy"),
    ("ROC-AUC", "calibration", "roc_auc"),
    ("false praise", "calibration", "false_praise_absolute"),
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
    lines = _intro_lines(metrics) + _comparison_lines(judges, notes)
    lines += _perturbation_lines(judges, st["tolerance"], notes)
    attacks = attack_lines(
        judges, lambda b, k: _fig(b, k, notes), st.get("fail_above"), metrics.get("attack_tests")
    )
    lines += ["", *attacks] if attacks else []
    costs = cost_lines(judges, timings or {})
    lines += ["", *costs] if costs else []
    lines += _agreement_lines(metrics.get("agreement", {}), notes)
    for label, path in images.items():
        lines += ["", f"![{label}]({path})"]
    for name in sorted(judges):
        lines += _judge_lines(name, judges[name], notes)
    if notes.reasons:
        lines += ["", "## Figures without a CI", *notes.lines()[1:]]
    return "\n".join(lines) + "\n"


def _intro_lines(metrics: dict[str, Any]) -> list[str]:
    st = metrics["settings"]
    return [
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
    ]


def _comparison_lines(judges: dict[str, Any], notes: _Notes) -> list[str]:
    lines = [
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
    return lines


def _perturbation_lines(judges: dict[str, Any], tolerance: Any, notes: _Notes) -> list[str]:
    lines = [
        "",
        "## Verbosity and superficial cues",
        "",
        "Effect: mean Δscore of perturbed candidates minus that of unperturbed controls (the "
        "tests' verdict is unchanged); without a scored control there is no effect. Robustness "
        "rate (CALM): share of perturbed candidates whose score moved by at most "
        f"{tolerance}.",
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
    return lines


def _agreement_lines(ag: dict[str, Any], notes: _Notes) -> list[str]:
    lines = ["", "## Agreement between judges", ""]
    if ag.get("reason"):
        return lines + [ag["reason"]]
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
    return lines


def _judge_lines(name: str, j: dict[str, Any], notes: _Notes) -> list[str]:
    """One judge's section: rows, position, perturbations, self-preference, noise floor."""
    lines = ["", f"## {name} ({j['judge_model']}, family {j['judge_family']})", ""]
    lines.append(f"- rows: {j['rows']['n_rows']}, unscored rate {j['rows']['unscored_rate']}")
    lines += _position_lines(j["position"], notes)
    for pert, v in sorted(j["perturbation"].items()):
        lines.append(
            f"- {pert} ({v.get('n_groups', 0)} groups, {v.get('n_treated', 0)} treated, "
            f"{v.get('n_control', 0)} controls): effect {_fig(v, 'effect', notes)}, "
            f"robustness rate {_fig(v, 'robustness_rate', notes)}"
        )
    lines.append(_self_preference_line(j["self_preference"], notes))
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
    return lines


def _self_preference_line(sp: dict[str, Any], notes: _Notes) -> str:
    """The gaps with the tasks each rests on (those with a matched cell), not the groups."""
    if sp.get("reason"):
        return f"- self-preference: {sp['reason']}"
    gaps = ", ".join(
        f"{kind} gap {_fig(sp, f'{kind}_gap', notes)} "
        f"({plural(sp.get(f'{kind}_gap_n_groups') or 0, 'task')} with a matched cell)"
        for kind in ("self", "family")
    )
    return f"- self-preference ({plural(sp.get('n_tasks', 0), 'task')} scored): {gaps}"


def run_probe_analysis(
    candidates: pl.DataFrame,
    scores: pl.DataFrame,
    settings: ProbesSettings,
    judge_models: dict[str, tuple[str, str]],
    out_dir: Path,
    *,
    rule: CIRule,
    calls: pl.DataFrame | None = None,
    costing: dict[str, JudgeCosting] | None = None,
) -> dict[str, Any]:
    """metrics.json, plots/*.png and report.md under out_dir; returns the metrics. With the
    probe calls table and the judges' costing, the cost figures too."""
    metrics = compute_probe_metrics(
        candidates, scores, settings, judge_models, rule=rule, calls=calls, costing=costing
    )
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
