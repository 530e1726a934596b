"""Position bias, figures per judge (views ``perm:*``, repeat 0; the table, views and tops:
`probe_views`), clustered by task.

Shi et al. 2024, "Judging the Judges":
- `position_consistency` (PC, Shi et al.): every candidate pair (a, b) in every pair of views
  in which their order is swapped. The judge's preference in a view is the higher-scored one
  (or "tie"); the pair is consistent when the preference is the same in both views.
  A pair tied in both views is *flat* (`n_flat_pairs`, `flat_pair_rate`): a flat judge is
  not consistent, it says nothing, so PC = consistent / n over the pairs that are not flat;
  `position_consistency_with_flat` keeps Shi et al.'s count (flat pairs consistent). The
  noise floor's PC leaves flat pairs out the same way.
- Position-driven pairs, each with its lean towards the earlier-shown candidate: primacy-
  preferred (the earlier-shown one preferred in both views: +1), recency-preferred (the later-
  shown one in both: -1), and a pair tied in one view and ordered in the other (+1/2 when the
  earlier-shown one won in the ordered view, -1/2 when the later-shown one did). Shi et al.
  count a tied-in-one-view pair as neither, so a judge that ranks by slot in one order and
  scores everything 0 in the other reads as fair there; here it does not. The slots that won
  those tied-in-one-view pairs are counted in `tied_pair_winner_slots`.
- `preference_fairness` (PF): Shi et al.'s formula as published, PF_raw = rc * irr - pc * ipr
  (rc, pc the recency- and primacy-preferred counts, irr, ipr their shares of the
  inconsistent pairs), min-max normalised over [-n, n]; a pair tied in one view counts as
  neither. `preference_fairness_tie_aware` = -(mean lean over the n swapped pairs) =
  (rc - pc) / n with a tied-in-one-view pair counting 1/2 towards the slot that won: a judge
  that ranks by slot in one order and ties everything in the other reads as fair under the
  published formula and not under this one. 0 is fair, < 0 favours earlier slots (primacy),
  > 0 later slots (recency).
- `slot_trend`: the within-candidate least-squares slope of score on slot index (each
  candidate's scores and slots centred on its own means, so quality drops out; > 0 favours
  later slots), CI over tasks, `slot_trend_p` a two-sided cluster t-test (jackknife SE over
  tasks, n - 1 df). Read with `slots[j].mean`: an alternating pattern is no trend.
- `slot_effect`: candidate-controlled position effect. Over every pair of views (v, w) of a
  group and every candidate shown first in v and last in w (its group's mirrored slot), the
  mean of score_v - score_w: how much the same candidate gains by being shown first rather
  than last (> 0: primacy). `slots[j].effect`: the same for slot j against its mirror
  k_g - 1 - j (k_g the group's size; none for the middle slot of an odd group).
- `top_choice_agreement`: over every pair of views of a group that both scored every member,
  the share that agree on their top (see above); `n_tied_view_pairs` of them had a tied top.
- `mean_abs_delta`: per candidate, the mean |score difference| over pairs of its views; the
  mean over candidates.
- `slot_mean[j]` and `slot_bias[j]` = slot_mean[j] - mean over all slots: the score a candidate
  gets for being shown at slot j (not candidate-controlled when orders are random);
  `top_rate[j]`: share of the views with a top whose top sits at slot j (1/k for an unbiased
  judge); `n_top_views` views had a top, `n_tied_top_views` had a tied top and do not count.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as scipy_stats

from judgelab.analysis.probe_views import (
    PERM,
    Scores,
    add_figure,
    by_task,
    earlier_wins,
    explain,
    group_sizes,
    preference,
    ratio_or_none,
    sum_over,
    top_of,
    view_scores,
)
from judgelab.analysis.stats import CIRule, jackknife_variance, too_few_groups

_POSITION_SUMS = (
    "top_same", "top_pairs", "top_tied_pairs", "pairs", "consistent", "primacy", "recency",
    "primacy_tied", "recency_tied", "lean", "delta_sum", "delta_n", "top_views", "tied_views",
    "flat", "ordered_pairs", "ordered_consistent", "trend_xy", "trend_xx",
)  # fmt: skip
_SLOT_SUMS = ("slot_sum", "slot_n", "top_slot", "tie_winner", "effect_sum", "effect_n")


def _position_parts(views: dict[str, Scores], size: int, k: int) -> dict[str, Any]:
    """Per-group sums from which every position figure is a ratio (size: the group's members,
    scored or not; k: slots over all groups; a view counts for the top-choice figures only
    when it scored every member)."""
    parts: dict[str, Any] = dict.fromkeys(_POSITION_SUMS, 0.0)
    for key in _SLOT_SUMS:
        parts[key] = np.zeros(k)
    names = sorted(views)
    _slot_sums(parts, views, names, size, k)
    _mirror_effects(parts, views, names, size)
    for v, w in itertools.combinations(names, 2):
        a, b = views[v], views[w]
        common = sorted(set(a) & set(b))
        if len(common) == size and size > 0:
            ta, tb = top_of(a), top_of(b)
            parts["top_pairs"] += 1
            parts["top_same"] += float(ta is not None and ta == tb)
            parts["top_tied_pairs"] += float(ta is None or tb is None)
        for x, y in itertools.combinations(common, 2):
            _swapped_pair(parts, a, b, x, y, k)
    _candidate_sums(parts, views, names)
    return parts


def _slot_sums(
    parts: dict[str, Any], views: dict[str, Scores], names: list[str], size: int, k: int
) -> None:
    """Score and top counts by slot."""
    for v in names:
        cands = views[v]
        for score, slot in cands.values():
            if slot is not None and slot < k:
                parts["slot_sum"][slot] += score
                parts["slot_n"][slot] += 1
        if len(cands) == size:
            top = top_of(cands)
            if top is None:
                parts["tied_views"] += 1
            elif cands[top][1] is not None:
                parts["top_slot"][cands[top][1]] += 1
                parts["top_views"] += 1


def _mirror_effects(
    parts: dict[str, Any], views: dict[str, Scores], names: list[str], size: int
) -> None:
    """The candidate-controlled effect of slot j against its mirror size - 1 - j."""
    for v, w in itertools.permutations(names, 2):
        a, b = views[v], views[w]
        for c in set(a) & set(b):
            (sa, sla), (sb, slb) = a[c], b[c]
            if sla is not None and slb is not None and sla != slb and sla + slb == size - 1:
                parts["effect_sum"][sla] += sa - sb
                parts["effect_n"][sla] += 1


def _swapped_pair(parts: dict[str, Any], a: Scores, b: Scores, x: str, y: str, k: int) -> None:
    """Pair (x, y) in views a and b: counted when their order is swapped between them."""
    (sxa, slxa), (sya, slya) = a[x], a[y]
    (sxb, slxb), (syb, slyb) = b[x], b[y]
    if None in (slxa, slya, slxb, slyb) or (slxa < slya) == (slxb < slyb):
        return  # order not swapped between these views
    parts["pairs"] += 1
    flat = preference(sxa, sya) == preference(sxb, syb) == -1  # tied in both orders
    parts["flat"] += float(flat)
    parts["ordered_pairs"] += float(not flat)
    if preference(sxa, sya) == preference(sxb, syb):
        parts["consistent"] += 1
        parts["ordered_consistent"] += float(not flat)
        return
    # p: 1 when the earlier-shown one wins, 1/2 tie, 0 the later-shown one.
    pa = earlier_wins(sxa, sya) if slxa < slya else earlier_wins(sya, sxa)
    pb = earlier_wins(sxb, syb) if slxb < slyb else earlier_wins(syb, sxb)
    lean = pa + pb - 1.0  # +1 primacy both, -1 recency both, +-1/2 tied in one
    parts["lean"] += lean
    if lean == 1.0:
        parts["primacy"] += 1
    elif lean == -1.0:
        parts["recency"] += 1
    else:  # tied in one view, ordered in the other: position-driven all the same
        parts["primacy_tied" if lean > 0 else "recency_tied"] += 1
        ordered = a if pb == 0.5 else b
        winner = x if ordered[x][0] > ordered[y][0] else y
        slot = ordered[winner][1]
        if slot is not None and slot < k:
            parts["tie_winner"][slot] += 1


def _candidate_sums(parts: dict[str, Any], views: dict[str, Scores], names: list[str]) -> None:
    """Per candidate seen in two or more views: its mean |score difference| between views, and
    the within-candidate sums of the slot trend (score and slot centred on the candidate's own
    means, so the candidate's quality drops out)."""
    cand_ids = set().union(*[set(c) for c in views.values()]) if views else set()
    for c in sorted(cand_ids):
        seen = [views[v][c] for v in names if c in views[v]]
        s = [score for score, _ in seen]
        if len(s) >= 2:
            d = [abs(p - q) for p, q in itertools.combinations(s, 2)]
            parts["delta_sum"] += float(np.mean(d))
            parts["delta_n"] += 1
        placed = [(score, slot) for score, slot in seen if slot is not None]
        if len(placed) >= 2:
            sc = np.array([score for score, _ in placed])
            sl = np.array([slot for _, slot in placed], dtype=float)
            parts["trend_xy"] += float(np.sum((sl - sl.mean()) * (sc - sc.mean())))
            parts["trend_xx"] += float(np.sum((sl - sl.mean()) ** 2))


def position_groups(rows: pl.DataFrame) -> dict[str, dict[str, Scores]]:
    """The groups the position figures rest on: scored under two or more permutations."""
    return {g: v for g, v in view_scores(rows, PERM).items() if len(v) >= 2}


def position_bias(rows: pl.DataFrame, rule: CIRule) -> dict[str, Any]:
    """Position figures of one judge (module docstring), CIs over groups."""
    multi = position_groups(rows)
    sizes = group_sizes(rows)
    k = max((sizes[g] for g in multi), default=0)
    out: dict[str, Any] = {"n_groups": len(multi), "k": k}
    if not multi:
        out["reason"] = "no group was scored under two or more permutations"
        return out
    parts = by_task(rows, list(multi), [_position_parts(v, sizes[g], k) for g, v in multi.items()])
    n = len(parts)
    out["n_tasks"] = n
    _position_figures(out, parts, n, rule)
    _slot_trend(out, parts, n, rule)
    _position_counts(out, parts)
    out["slots"] = _slot_figures(parts, n, k, rule)
    return out


def _position_figures(out: dict[str, Any], parts: list[dict[str, Any]], n: int,
                      rule: CIRule) -> None:  # fmt: skip
    def ratio(num: str, den: str) -> Callable[[np.ndarray], float | None]:
        return lambda idx: ratio_or_none(sum_over(parts, idx, num), sum_over(parts, idx, den))

    def fairness(idx: np.ndarray) -> float | None:
        n_pairs = sum_over(parts, idx, "pairs")
        return -float(sum_over(parts, idx, "lean") / n_pairs) if n_pairs else None

    def fairness_shi(idx: np.ndarray) -> float | None:
        n_pairs = sum_over(parts, idx, "pairs")
        rc, pc = sum_over(parts, idx, "recency"), sum_over(parts, idx, "primacy")
        inconsistent = n_pairs - sum_over(parts, idx, "consistent")
        if not n_pairs:
            return None
        if not inconsistent:
            return 0.0
        return (rc * rc / inconsistent - pc * pc / inconsistent) / n_pairs

    def slot_effect(idx: np.ndarray) -> float | None:
        return ratio_or_none(
            sum_over(parts, idx, "effect_sum")[0], sum_over(parts, idx, "effect_n")[0]
        )

    add_figure(out, "position_consistency", n, ratio("ordered_consistent", "ordered_pairs"), rule)
    add_figure(out, "position_consistency_with_flat", n, ratio("consistent", "pairs"), rule)
    add_figure(out, "flat_pair_rate", n, ratio("flat", "pairs"), rule)
    add_figure(out, "preference_fairness", n, fairness_shi, rule)
    add_figure(out, "preference_fairness_tie_aware", n, fairness, rule)
    add_figure(out, "slot_effect", n, slot_effect, rule)
    add_figure(out, "top_choice_agreement", n, ratio("top_same", "top_pairs"), rule)
    add_figure(out, "mean_abs_delta", n, ratio("delta_sum", "delta_n"), rule)
    swap = "no candidate pair was scored in two views that swap it"
    explain(out, {
        "position_consistency": "no swapped pair was ordered (not tied in both views)",
        "position_consistency_with_flat": swap,
        "flat_pair_rate": swap,
        "preference_fairness": swap,
        "preference_fairness_tie_aware": swap,
        "slot_effect": "no candidate was scored both first and last (mirrored orders)",
        "top_choice_agreement": "no two views of a group scored every member",
        "mean_abs_delta": "no candidate was scored in two views",
    })  # fmt: skip


def _slot_trend(out: dict[str, Any], parts: list[dict[str, Any]], n: int,
                rule: CIRule) -> None:  # fmt: skip
    """`slot_trend`: the within-candidate least-squares slope of score on slot index (score
    per slot later; > 0 favours later slots, < 0 earlier ones), with its CI over tasks and
    `slot_trend_p`, a two-sided cluster t-test (jackknife SE over tasks, t with n - 1 df)."""

    def slope(idx: np.ndarray) -> float | None:
        return ratio_or_none(sum_over(parts, idx, "trend_xy"), sum_over(parts, idx, "trend_xx"))

    add_figure(out, "slot_trend", n, slope, rule)
    explain(out, {"slot_trend": "no candidate was scored at two different slots"})
    out["slot_trend_p"] = None
    value = out.get("slot_trend")
    if value is None or too_few_groups(n, rule.min_ci_groups):
        return
    every = np.arange(n)
    left_out = np.array([slope(np.delete(every, i)) for i in every], dtype=float)
    var, _ = jackknife_variance(left_out)
    if np.isfinite(var) and var > 0:
        t = value / np.sqrt(var)
        out["slot_trend_p"] = float(2 * scipy_stats.t.sf(abs(t), n - 1))
    elif np.isfinite(var):  # every task gives the same slope: no noise to test against
        out["slot_trend_p"] = 0.0 if value != 0 else 1.0


def _position_counts(out: dict[str, Any], parts: list[dict[str, Any]]) -> None:
    every = np.arange(len(parts))
    for key, name in (
        ("top_pairs", "n_view_pairs"), ("top_tied_pairs", "n_tied_view_pairs"),
        ("pairs", "n_swapped_pairs"), ("flat", "n_flat_pairs"),
        ("primacy", "n_primacy_preferred"), ("recency", "n_recency_preferred"),
        ("primacy_tied", "n_primacy_tied"), ("recency_tied", "n_recency_tied"),
        ("top_views", "n_top_views"), ("tied_views", "n_tied_top_views"),
    ):  # fmt: skip
        out[name] = int(sum_over(parts, every, key))
    winners = sum_over(parts, every, "tie_winner")
    out["tied_pair_winner_slots"] = {str(j): int(c) for j, c in enumerate(winners) if c}
    out["n_slot_effect_pairs"] = int(sum_over(parts, every, "effect_n")[0])


def _slot_figures(parts: list[dict[str, Any]], n: int, k: int,
                  rule: CIRule) -> dict[str, Any]:  # fmt: skip
    """Per slot: mean score, bias against the mean of the slots, mirror effect, top rate."""
    every = np.arange(n)
    slots: dict[str, Any] = {}
    for j in range(k):

        def slot_mean(idx: np.ndarray, j: int = j) -> float | None:
            return ratio_or_none(
                sum_over(parts, idx, "slot_sum")[j], sum_over(parts, idx, "slot_n")[j]
            )

        def slot_bias(idx: np.ndarray, j: int = j) -> float | None:
            s, c = sum_over(parts, idx, "slot_sum"), sum_over(parts, idx, "slot_n")
            if not c[j] or not c.sum():
                return None
            means = s[c > 0] / c[c > 0]
            return float(s[j] / c[j] - means.mean())

        def effect(idx: np.ndarray, j: int = j) -> float | None:
            return ratio_or_none(
                sum_over(parts, idx, "effect_sum")[j], sum_over(parts, idx, "effect_n")[j]
            )

        def top_rate(idx: np.ndarray, j: int = j) -> float | None:
            return ratio_or_none(
                sum_over(parts, idx, "top_slot")[j], sum_over(parts, idx, "top_views")
            )

        slot: dict[str, Any] = {}
        add_figure(slot, "mean", n, slot_mean, rule)
        add_figure(slot, "bias", n, slot_bias, rule)
        add_figure(slot, "effect", n, effect, rule)
        add_figure(slot, "top_rate", n, top_rate, rule)
        slot["n_effect_pairs"] = int(sum_over(parts, every, "effect_n")[j])
        slot["n_scores"] = int(sum_over(parts, every, "slot_n")[j])
        slots[str(j)] = slot
    return slots
