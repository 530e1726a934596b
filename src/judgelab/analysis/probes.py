"""Probe analysis: the per-judge bias figures and agreement between judges
(`judgelab.report.probes` writes them, with plots and a report).

`compute_probe_metrics(candidates, scores, settings, judges)` -> the dict written to
`data/probes/metrics.json` (deterministic: sorted keys, rounded floats, no timings):

- ``judges[name]``, one per probed evaluator:
  * ``rows``: n_rows, unscored_rate, out_of_range_rate (`stats.stats_for_evaluator`);
  * ``calibration``: `fidelity.truth_metrics` on the known-truth groups (top-1 accuracy, pairwise
    accuracy, ROC-AUC, false-praise rate...), each candidate's score being the mean of its
    permutation views (slot effects average out), clustered by group for the CIs; with
    `order_consistent_accuracy` (JudgeBench, CodeJudgeBench): over (passing, failing) pairs
    of a group scored in two or more permutation views, the share whose passing candidate
    scores strictly higher in every view (`order_consistent_pairs` of `order_pairs`);
  * ``position``: `position.position_bias` over every group's permutation views (views at
    ``probes.temperature``, 0 by default);
  * ``perturbation``: `perturbation.perturbation_bias` per perturbation;
  * ``self_preference``: `self_preference.self_preference` (the judge's row of the policy x
    judge matrix and its self/family gaps on candidates matched on task and test verdict);
  * ``noise_floor`` (on the groups of the position figures) and ``noise_floor_perturbation``
    (on the perturbed known-truth groups): `noise_floor.noise_floor` between the calls of the
    identity view at ``probes.repeat_temperature`` (repeats 1.., and repeat 0 too when the two
    temperatures are equal), with repeat stability; `floor_for` marks a floor ``unusable``
    (measured at another temperature than the order views, or from fewer than
    FLOOR_MIN_CALLS calls of a group) and then no figure gets one (``noise_floor_reason``
    says why). Beside each order and perturbation figure sits
    ``<figure>_noise_floor``, the value a judge with no position or perturbation bias but this
    much noise shows: position consistency, top-choice agreement and mean |delta| beside their
    namesakes, pair instability beside preference fairness, score noise (mean |delta|) beside
    the slot effect and the perturbation effect, the robustness rate beside its namesake.
  * ``attacks``: `attacks.attack_bias` per configured attack (success rate on the judge's own
    scale, its baseline, the uplift with its p-value, score shift against the control,
    stability of semantics-preserving edits);
  * ``cost`` (when the calls table is given): `cost.cost_metrics`, tokens and money per
    correctly ordered pass/fail pair (the time figures go to the report only).
- ``agreement``: over candidates every judge scored (mean of permutation views, repeat 0):
  Krippendorff's alpha (interval) across all judges; per judge pair Kendall's tau-b inside each
  group (mean over groups) and Cohen's kappa of scores binarised at ``praise_threshold``.
- ``matrix``: policy -> judge -> mean score (the self-preference heatmap).
- ``attack_tests``: the family of judge x attack tests (`attacks.holm_attacks`): every
  attack on failing code with a p-value, over all judges, Holm-adjusted at alpha =
  1 - the CIs' level (0.05): ``n_tests``, ``alpha``, ``correction``.
Every figure carries ``_ci_low``/``_ci_high``: 95 % percentile CIs of a cluster bootstrap over
groups (`agreement.with_ci`, same resampling as the truth metrics; the attack and
self-preference figures: the truth figures' own intervals over tasks, `intervals.ratio_with_ci`),
only when the figure
rests on at least ``rule.min_ci_groups`` groups (``min_ci_groups`` in the output); below that
both are null and ``<figure>_ci_reason`` says why ("n = 2 groups: too few for a CI (minimum
5)").
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.agreement import (
    cohen_kappa,
    kendall_tau_b,
    krippendorff_alpha_interval,
)
from judgelab.analysis.attacks import attack_bias, holm_attacks
from judgelab.analysis.cost import (
    JudgeCosting,
    cost_metrics,
)
from judgelab.analysis.fidelity import truth_metrics
from judgelab.analysis.intervals import figure_with_ci
from judgelab.analysis.noise_floor import noise_floor
from judgelab.analysis.perturbation import perturbation_bias
from judgelab.analysis.position import position_bias, position_groups
from judgelab.analysis.probe_views import PERM, PERT, view_scores
from judgelab.analysis.self_preference import self_preference
from judgelab.analysis.stats import CIRule, clean_json, resample_weights, stats_for_evaluator
from judgelab.analysis.truth import Truth
from judgelab.config import AnalysisSettings, ProbesSettings
from judgelab.schemas import ScoresSchema, columns

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


def calibration(rows: pl.DataFrame, threshold: float, rule: CIRule) -> dict[str, Any]:
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
    weights = resample_weights(len(tasks), rule.n_boot, rule.seed) if rule.n_boot else None
    out = truth_metrics(means, truth, threshold, weights, rule)
    out.update(order_consistent(cal, table, rule))
    return out


def order_consistent(cal: pl.DataFrame, table: pl.DataFrame, rule: CIRule) -> dict[str, Any]:
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

    out = figure_with_ci("order_consistent_accuracy", len(per_group), stat, rule)
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
# which says little about the noise; three give three pairwise differences.
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


def floor_for(
    rows: pl.DataFrame, settings: ProbesSettings, groups: list[str], rule: CIRule
) -> dict[str, Any]:
    """The noise floor on `groups` (those of the figures it sits beside), with `unusable`
    set when it was measured at another temperature than the order views or from fewer than
    FLOOR_MIN_CALLS calls of some group."""
    floor = noise_floor(rows, noise_repeats(settings), settings.tolerance, rule, groups=groups)
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


def agreement(
    scores: pl.DataFrame, judges: list[str], threshold: float, rule: CIRule
) -> dict[str, Any]:
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

    out.update(figure_with_ci("krippendorff_alpha", n, alpha, rule))
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
        pair.update(figure_with_ci("kendall_tau", n, tau, rule))
        pair.update(figure_with_ci("cohen_kappa", n, kappa, rule))
        pairs[f"{a}|{b}"] = pair
    out["pairs"] = pairs
    return out


def probe_ci_rule(analysis: AnalysisSettings, probes: ProbesSettings) -> CIRule:
    """The probes' CIs: the analysis minimum of groups and level, the probes' resamples."""
    return CIRule.of(analysis).resampled(probes.bootstrap, probes.seed)


def compute_probe_metrics(
    candidates: pl.DataFrame,
    scores: pl.DataFrame,
    settings: ProbesSettings,
    judge_models: dict[str, tuple[str, str]],
    *,
    rule: CIRule,
    calls: pl.DataFrame | None = None,
    costing: dict[str, JudgeCosting] | None = None,
) -> dict[str, Any]:
    """Every probe figure (module docstring). `judge_models`: evaluator -> (model, family);
    `rule`: how every CI is drawn (`probe_ci_rule`); `calls` (the probe calls table) and
    `costing` (evaluator -> its model's costing) give the cost figures."""
    judges = sorted(scores["evaluator"].unique().to_list()) if scores.height else []
    result: dict[str, Any] = {}
    matrix: dict[str, dict[str, Any]] = {}
    for name in judges:
        rows = scores.filter(pl.col("evaluator") == name)
        model, family = judge_models.get(name, (name, "unknown"))
        result[name] = judge_figures(rows, settings, model, family, rule)
        for policy, cell in result[name]["self_preference"].get("matrix", {}).items():
            matrix.setdefault(policy, {})[name] = cell
        if calls is not None and costing and name in costing:
            result[name]["cost"] = cost_metrics(
                calls.filter(pl.col("evaluator") == name), rows, costing[name], rule
            )
    attack_tests = holm_attacks(result, round(1 - rule.level, 12))
    return clean_json(
        {
            "judges": result,
            "attack_tests": attack_tests,
            "agreement": agreement(scores, judges, settings.praise_threshold, rule),
            "matrix": matrix,
            "n_groups": candidates["group_id"].n_unique() if candidates.height else 0,
            "n_candidates": candidates.height,
            "n_score_rows": scores.height,
            "min_ci_groups": rule.min_ci_groups,
            "temperature": settings.temperature,
            "settings": settings.model_dump(mode="json"),
        }
    )


def judge_figures(
    rows: pl.DataFrame, settings: ProbesSettings, model: str, family: str, rule: CIRule
) -> dict[str, Any]:
    """One judge's probe figures (module docstring: ``judges[name]``) from its rows."""
    base = stats_for_evaluator(rows.select(columns(ScoresSchema).names()))
    calibrated = rows.filter(pl.col("probe") == "calibration")
    floor = floor_for(rows, settings, sorted(position_groups(rows)), rule)
    position = position_bias(rows, rule)
    with_floor(position, floor, FLOOR_OF)
    perturbation = perturbation_bias(calibrated, settings.tolerance, rule)
    pert_floor = floor_for(rows, settings, _perturbed_groups(calibrated), rule)
    for fig in perturbation.values():
        with_floor(fig, pert_floor, PERTURBATION_FLOOR_OF)
    selfp = rows.filter(pl.col("probe") == "self_preference")
    return {
        "judge_model": model,
        "judge_family": family,
        "rows": {k: base[k] for k in ("n_rows", "n_scored", "unscored_rate", "out_of_range_rate")},
        "calibration": calibration(rows, settings.praise_threshold, rule),
        "position": position,
        "perturbation": perturbation,
        "self_preference": self_preference(selfp, model, family, rule),
        "noise_floor": floor,
        "noise_floor_perturbation": pert_floor,
        "attacks": attack_bias(calibrated, settings.praise_threshold, settings.tolerance, rule),
    }
