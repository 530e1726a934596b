"""Bias probes, figures per judge: position, perturbation (verbosity and superficial cues),
self-preference and the noise floor, each with a 95 % cluster-bootstrap CI when there are at
least `rule.min_ci_groups` clusters (`stats.CIRule`; below that: the value, null CI bounds and
the reason in ``<figure>_ci_reason``, as every figure of judgelab: `analysis.stats.Interval`).
For position and the noise floor the clusters are tasks (`by_task`: a task's calibration and
self-preference groups are one cluster; `n_tasks`, and `<figure>_n_groups` counts tasks).

Input is the probe scores table (`judgelab.schemas.ProbeScoresSchema`) filtered to one judge's
evaluator. A *group* is the set of candidates judged together; a *view* is one judge call's
arrangement of it: ``perm:<i>`` (permutation i of the group, ``perm:0`` the identity order and
``perm:1`` the reversal), ``pert:<name>`` (identity order, the candidates with ``treated`` True
replaced by their perturbed copy); repeats r >= 1 of ``perm:0`` are the identity view again at
the repeat temperature (the noise floor). Unscored rows never count as 0: a comparison that
needs a missing score is left out.

A view's *top* is its unique highest-scored candidate; a view whose highest score is shared
has no top. A tie at the top is never agreement: two views agree on their top only when both
have one and it is the same candidate.

Position (views ``perm:*``, repeat 0; Shi et al. 2024, "Judging the Judges"):
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

Noise floor (`noise_floor`; repeats of ``perm:0`` at the repeat temperature): the same
figures computed between every two calls of the identity view, i.e. what a judge with no
position or perturbation bias but this much sampling noise would show. `position_consistency`
(same preference for a pair in both calls), `top_choice_agreement`, `mean_abs_delta`,
`robustness_rate` (share of candidates whose score moved by at most `tolerance` between two
calls), `pair_instability` (mean |p_r - p_s| over pairs, p = 1, 1/2, 0 for earlier-shown
wins, tie, later-shown wins: the largest |preference_fairness| noise alone can produce) and
`stability` (Shi et al.'s repetition stability: per group, the share of calls whose top is the
group's most frequent top, a call without a top never counting; mean over groups).

Perturbation (per perturbation name; CALM, Ye et al. 2024): candidates whose verdict the tests
still give unchanged are perturbed in view ``pert:<name>``, the others stay as controls.
- `delta_treated`/`delta_control`: mean score change from ``perm:0`` to ``pert:<name>``;
  `effect` = delta_treated - delta_control (the controls absorb call-to-call noise); without a
  scored control there is no controlled effect (null, with the reason), never delta_treated.
- `robustness_rate`: CALM's RR = share of treated candidates whose judgement is unchanged,
  here |delta| <= `tolerance`.

Self-preference (groups whose candidates come from several policies; score = mean over its
``perm:*`` views, so slot effects average out):
- `matrix[policy]` = mean score this judge gives to that policy's candidates.
- `self_gap`: mean score of the judge's own model's candidates minus that of candidates from
  other families; `family_gap`: same family but a different model, minus other families. Both
  on matched candidates: the difference is taken within each cell of one task (group) and one
  known test verdict holding both, averaged with weights n_own * n_other / (n_own + n_other)
  (`n_<kind>_matched_cells`). Without a match the gap is null and `<kind>_gap_confounded` is
  True; `<kind>_gap_unmatched` (within `passed` strata pooled over tasks) stays beside it: it
  compares code of different tasks and quality, not families.
- Clusters are tasks: `n_tasks` counts the tasks with a scored candidate, and each figure's
  `<figure>_n_groups` only the tasks that contribute to it (a gap: those with a matched
  cell), so a gap resting on 9 tasks says n = 9, not the number of groups scored. Intervals
  are the truth figures' (`ratio_with_ci`, `stats.cluster_ci`): the matrix means and the
  matched gaps are ratios of per-task sums (studentized cluster bootstrap), the unmatched gap
  gets the jackknife t interval; none from fewer than `rule.min_ci_groups` tasks.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as scipy_stats

from judgelab.analysis.agreement import with_ci
from judgelab.analysis.stats import (
    NO_BOOTSTRAP,
    CIRule,
    Interval,
    cluster_ci,
    jackknife_variance,
    no_interval,
    t_ci,
    too_few_groups,
)
from judgelab.analysis.truth import resample_weights

PERM = "perm:"
PERT = "pert:"

Scores = dict[str, tuple[float, int | None]]  # candidate_id -> (score, slot)


def _scored(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.filter((pl.col("status") == "scored") & pl.col("score").is_not_null())


def view_scores(rows: pl.DataFrame, prefix: str) -> dict[str, dict[str, Scores]]:
    """group -> view -> candidate_id -> (score, slot), views starting with `prefix`, repeat 0."""
    out: dict[str, dict[str, Scores]] = {}
    sel = _scored(rows).filter(pl.col("view").str.starts_with(prefix) & (pl.col("repeat") == 0))
    for r in sel.iter_rows(named=True):
        out.setdefault(r["group_id"], {}).setdefault(r["view"], {})[r["candidate_id"]] = (
            float(r["score"]),
            int(r["slot"]) if r["slot"] is not None else None,
        )
    return out


def group_sizes(rows: pl.DataFrame) -> dict[str, int]:
    """group -> members shown per ``perm:*`` call, scored or not."""
    perm = rows.filter(pl.col("view").str.starts_with(PERM) & (pl.col("repeat") == 0))
    counts = perm.group_by("group_id", "view").len().group_by("group_id").agg(pl.col("len").max())
    return dict(counts.iter_rows())


def figure_with_ci(
    name: str,
    n: int,
    stat: Callable[[np.ndarray], float | None],
    rule: CIRule,
) -> dict[str, Any]:
    """`agreement.with_ci`'s fields: {name, name_ci_low, name_ci_high, name_ci_reason, ...},
    the CI only from `rule.min_ci_groups` groups or more."""
    return with_ci(name, n, stat, rule)


def ratio_with_ci(
    name: str,
    num: np.ndarray | list[float],
    den: np.ndarray | list[float],
    rule: CIRule,
    *,
    share: bool = False,
    bounds: tuple[float, float] = (-np.inf, np.inf),
) -> dict[str, Any]:
    """{name: sum num / sum den over the clusters (tasks) with den > 0, **its Interval's
    fields}, the interval the truth figures use (`stats.cluster_ci`): a `share` of units
    (den counts them) gets Wilson's interval at the effective size, which never collapses to
    [0, 0] at 0 of n; any other ratio the studentized cluster bootstrap, clipped to `bounds`.
    `<name>_n_groups` counts the contributing clusters; fewer than `rule.min_ci_groups`: no CI."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    used = den > 0
    num, den = num[used], den[used]
    n = int(used.sum())
    value = float(num.sum() / den.sum()) if n else None
    return {name: value, **_ratio_interval(value, num, den, rule, share, bounds).fields(name)}


def _ratio_interval(value: float | None, num: np.ndarray, den: np.ndarray, rule: CIRule,
                    share: bool, bounds: tuple[float, float]) -> Interval:  # fmt: skip
    n = num.size
    if value is None:
        return no_interval("no cluster contributes: the figure is undefined", n)
    if rule.n_boot == 0:  # as the truth figures: bootstrap = 0 turns every CI off
        return no_interval(NO_BOOTSTRAP, n)
    rest_num, rest_den = num.sum() - num, den.sum() - den
    with np.errstate(divide="ignore", invalid="ignore"):
        jackknife = np.where(rest_den > 0, rest_num / rest_den, np.nan)
    weights = resample_weights(n, rule.n_boot, rule.seed)
    return cluster_ci(value, jackknife, n, rule.min_ci_groups,
                      units=int(den.sum()) if share else None,
                      ratio=None if share else (num, den), weights=weights,
                      bounds=bounds)  # fmt: skip


def difference_with_ci(
    name: str,
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    rule: CIRule,
) -> dict[str, Any]:
    """{name: R_a - R_b, **fields}, each R = sum num / sum den over the clusters where both
    denominators are positive, with the truth figures' interval for a figure that is neither
    a share nor one ratio: R +- t_(n-1) jackknife SE over those clusters (`stats.t_ci`)."""
    (na, da), (nb, db) = (tuple(np.asarray(x, dtype=float) for x in p) for p in (a, b))
    used = (da > 0) & (db > 0)
    na, da, nb, db = na[used], da[used], nb[used], db[used]
    n = int(used.sum())
    value = float(na.sum() / da.sum() - nb.sum() / db.sum()) if n else None
    if value is None:
        interval = no_interval("no cluster contributes: the figure is undefined", n)
    elif rule.n_boot == 0:
        interval = no_interval(NO_BOOTSTRAP, n)
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            jackknife = (na.sum() - na) / (da.sum() - da) - (nb.sum() - nb) / (db.sum() - db)
        interval = t_ci(value, jackknife, n, rule.min_ci_groups, rule.level)
    return {name: value, **interval.fields(name)}


def _figure(
    out: dict[str, Any],
    name: str,
    n: int,
    stat: Callable[[np.ndarray], float | None],
    rule: CIRule,
) -> None:
    out.update(figure_with_ci(name, n, stat, rule))


def _explain(out: dict[str, Any], why: dict[str, str]) -> None:
    """out["reasons"][figure] for every figure that came out null."""
    for key, reason in why.items():
        if out.get(key) is None:
            out.setdefault("reasons", {})[key] = reason


def by_task(rows: pl.DataFrame, groups: list[str], parts: list[dict[str, Any]]) -> list[Any]:
    """Per-group sums added up per task: a task's probe groups (its calibration and its
    self-preference group) share the task's difficulty, so the bootstrap resamples tasks,
    not groups. A group without a task id is a cluster of its own."""
    task = dict(rows.select("group_id", "task_id").unique(subset="group_id").iter_rows())
    merged: dict[str, dict[str, Any]] = {}
    for g, p in zip(groups, parts, strict=True):
        key = task.get(g) or g
        if key not in merged:
            merged[key] = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in p.items()}
        else:
            for k, v in p.items():
                merged[key][k] = merged[key][k] + v
    return [merged[t] for t in sorted(merged)]


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den else None


def _sum(parts: list[dict[str, Any]], idx: np.ndarray, key: str) -> Any:
    return sum((parts[i][key] for i in idx), start=0.0 * parts[0][key])


def top_of(cands: Scores) -> str | None:
    """The view's unique highest-scored candidate; None when the top score is shared."""
    if not cands:
        return None
    best = max(s for s, _ in cands.values())
    tops = [c for c, (s, _) in cands.items() if s == best]
    return tops[0] if len(tops) == 1 else None


def _pref(sa: float, sb: float) -> int:
    return 0 if sa > sb else (1 if sb > sa else -1)


def _earlier_wins(s_first: float, s_second: float) -> float:
    """1 when the earlier-shown candidate scores higher, 1/2 for a tie, 0 otherwise."""
    return 1.0 if s_first > s_second else (0.5 if s_first == s_second else 0.0)


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
    flat = _pref(sxa, sya) == _pref(sxb, syb) == -1  # tied in both orders
    parts["flat"] += float(flat)
    parts["ordered_pairs"] += float(not flat)
    if _pref(sxa, sya) == _pref(sxb, syb):
        parts["consistent"] += 1
        parts["ordered_consistent"] += float(not flat)
        return
    # p: 1 when the earlier-shown one wins, 1/2 tie, 0 the later-shown one.
    pa = _earlier_wins(sxa, sya) if slxa < slya else _earlier_wins(sya, sxa)
    pb = _earlier_wins(sxb, syb) if slxb < slyb else _earlier_wins(syb, sxb)
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
        return lambda idx: _ratio(_sum(parts, idx, num), _sum(parts, idx, den))

    def fairness(idx: np.ndarray) -> float | None:
        n_pairs = _sum(parts, idx, "pairs")
        return -float(_sum(parts, idx, "lean") / n_pairs) if n_pairs else None

    def fairness_shi(idx: np.ndarray) -> float | None:
        n_pairs = _sum(parts, idx, "pairs")
        rc, pc = _sum(parts, idx, "recency"), _sum(parts, idx, "primacy")
        inconsistent = n_pairs - _sum(parts, idx, "consistent")
        if not n_pairs:
            return None
        if not inconsistent:
            return 0.0
        return (rc * rc / inconsistent - pc * pc / inconsistent) / n_pairs

    def slot_effect(idx: np.ndarray) -> float | None:
        return _ratio(_sum(parts, idx, "effect_sum")[0], _sum(parts, idx, "effect_n")[0])

    _figure(out, "position_consistency", n, ratio("ordered_consistent", "ordered_pairs"), rule)
    _figure(out, "position_consistency_with_flat", n, ratio("consistent", "pairs"), rule)
    _figure(out, "flat_pair_rate", n, ratio("flat", "pairs"), rule)
    _figure(out, "preference_fairness", n, fairness_shi, rule)
    _figure(out, "preference_fairness_tie_aware", n, fairness, rule)
    _figure(out, "slot_effect", n, slot_effect, rule)
    _figure(out, "top_choice_agreement", n, ratio("top_same", "top_pairs"), rule)
    _figure(out, "mean_abs_delta", n, ratio("delta_sum", "delta_n"), rule)
    swap = "no candidate pair was scored in two views that swap it"
    _explain(out, {
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
        return _ratio(_sum(parts, idx, "trend_xy"), _sum(parts, idx, "trend_xx"))

    _figure(out, "slot_trend", n, slope, rule)
    _explain(out, {"slot_trend": "no candidate was scored at two different slots"})
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
        out[name] = int(_sum(parts, every, key))
    winners = _sum(parts, every, "tie_winner")
    out["tied_pair_winner_slots"] = {str(j): int(c) for j, c in enumerate(winners) if c}
    out["n_slot_effect_pairs"] = int(_sum(parts, every, "effect_n")[0])


def _slot_figures(parts: list[dict[str, Any]], n: int, k: int,
                  rule: CIRule) -> dict[str, Any]:  # fmt: skip
    """Per slot: mean score, bias against the mean of the slots, mirror effect, top rate."""
    every = np.arange(n)
    slots: dict[str, Any] = {}
    for j in range(k):

        def slot_mean(idx: np.ndarray, j: int = j) -> float | None:
            return _ratio(_sum(parts, idx, "slot_sum")[j], _sum(parts, idx, "slot_n")[j])

        def slot_bias(idx: np.ndarray, j: int = j) -> float | None:
            s, c = _sum(parts, idx, "slot_sum"), _sum(parts, idx, "slot_n")
            if not c[j] or not c.sum():
                return None
            means = s[c > 0] / c[c > 0]
            return float(s[j] / c[j] - means.mean())

        def effect(idx: np.ndarray, j: int = j) -> float | None:
            return _ratio(_sum(parts, idx, "effect_sum")[j], _sum(parts, idx, "effect_n")[j])

        def top_rate(idx: np.ndarray, j: int = j) -> float | None:
            return _ratio(_sum(parts, idx, "top_slot")[j], _sum(parts, idx, "top_views"))

        slot: dict[str, Any] = {}
        _figure(slot, "mean", n, slot_mean, rule)
        _figure(slot, "bias", n, slot_bias, rule)
        _figure(slot, "effect", n, effect, rule)
        _figure(slot, "top_rate", n, top_rate, rule)
        slot["n_effect_pairs"] = int(_sum(parts, every, "effect_n")[j])
        slot["n_scores"] = int(_sum(parts, every, "slot_n")[j])
        slots[str(j)] = slot
    return slots


_FLOOR_SUMS = (
    "top_same", "top_pairs", "pairs", "consistent", "instability", "delta_sum", "delta_n",
    "robust", "robust_n", "stability_sum", "stability_n", "ordered_pairs", "ordered_consistent",
)  # fmt: skip


def _identity_calls(
    rows: pl.DataFrame, repeats: Collection[int]
) -> tuple[dict[str, dict[int, Scores]], dict[str, int]]:
    """group -> repeat -> scores of the identity view's calls among `repeats`, and each
    group's size (members shown per call, scored or not)."""
    shown = rows.filter((pl.col("view") == f"{PERM}0") & pl.col("repeat").is_in(list(repeats)))
    sizes = dict(
        shown.group_by("group_id", "repeat").len().group_by("group_id")
        .agg(pl.col("len").max()).iter_rows()
    )  # fmt: skip
    calls: dict[str, dict[int, Scores]] = {}
    for r in _scored(shown).iter_rows(named=True):
        calls.setdefault(r["group_id"], {}).setdefault(r["repeat"], {})[r["candidate_id"]] = (
            float(r["score"]),
            int(r["slot"]) if r["slot"] is not None else None,
        )
    return calls, sizes


def _floor_parts(by_call: dict[int, Scores], size: int, tolerance: float) -> dict[str, float]:
    """Per-group sums of the noise-floor figures over every two calls of the group."""
    p = dict.fromkeys(_FLOOR_SUMS, 0.0)
    full = [c for c in by_call.values() if len(c) == size]
    named = Counter(t for t in (top_of(c) for c in full) if t is not None)
    p["stability_sum"] = max(named.values(), default=0) / len(full) if full else 0.0
    p["stability_n"] = 1.0 if full else 0.0
    for a, b in itertools.combinations([by_call[r] for r in sorted(by_call)], 2):
        common = sorted(set(a) & set(b))
        if len(common) == size:
            ta, tb = top_of(a), top_of(b)
            p["top_pairs"] += 1
            p["top_same"] += float(ta is not None and ta == tb)
        for c in common:
            p["robust"] += float(abs(a[c][0] - b[c][0]) <= tolerance)
            p["robust_n"] += 1
        for x, y in itertools.combinations(common, 2):
            _floor_pair(p, a, b, x, y)
    for c in set().union(*by_call.values()):
        s = [by_call[r][c][0] for r in sorted(by_call) if c in by_call[r]]
        if len(s) >= 2:
            p["delta_sum"] += float(np.mean([abs(u - v) for u, v in
                                             itertools.combinations(s, 2)]))  # fmt: skip
            p["delta_n"] += 1
    return p


def _floor_pair(p: dict[str, float], a: Scores, b: Scores, x: str, y: str) -> None:
    if a[x][1] is None or a[y][1] is None:
        return
    first, second = (x, y) if a[x][1] < a[y][1] else (y, x)
    p["pairs"] += 1
    same = _pref(a[x][0], a[y][0]) == _pref(b[x][0], b[y][0])
    p["consistent"] += float(same)
    flat = same and _pref(a[x][0], a[y][0]) == -1  # tied in both calls
    p["ordered_pairs"] += float(not flat)
    p["ordered_consistent"] += float(same and not flat)
    p["instability"] += abs(
        _earlier_wins(a[first][0], a[second][0]) - _earlier_wins(b[first][0], b[second][0])
    )


def noise_floor(
    rows: pl.DataFrame,
    repeats: Collection[int],
    tolerance: float,
    rule: CIRule,
    *,
    groups: Collection[str] | None = None,
) -> dict[str, Any]:
    """Figures between every two calls of the identity view ``perm:0`` among `repeats` (the
    calls at the repeat temperature), CIs over tasks (module docstring); only `groups` when
    given (the groups of the figure the floor sits beside)."""
    calls, sizes = _identity_calls(rows, repeats)
    if groups is not None:
        calls = {g: c for g, c in calls.items() if g in set(groups)}
    part_groups = [g for g in sorted(calls) if len(calls[g]) >= 2]
    parts = [_floor_parts(calls[g], sizes[g], tolerance) for g in part_groups]
    out: dict[str, Any] = {"repeats": sorted(repeats), "n_groups": len(parts),
                           "tolerance": tolerance,
                           "calls_per_group": min((len(calls[g]) for g in part_groups),
                                                  default=0)}  # fmt: skip
    if not parts:
        out["reason"] = (
            f"no group has two or more scored calls of the identity view among repeats "
            f"{sorted(repeats)} (probes.repeats too low?)"
        )
        return out
    parts = by_task(rows, part_groups, parts)
    out["n_tasks"] = len(parts)
    _floor_figures(out, parts, rule)
    out["n_call_pairs"] = int(sum(p["top_pairs"] for p in parts))
    out["n_pairs"] = int(sum(p["pairs"] for p in parts))
    return out


def _floor_figures(out: dict[str, Any], parts: list[dict[str, Any]], rule: CIRule) -> None:
    n = len(parts)

    def r(num: str, den: str) -> Callable[[np.ndarray], float | None]:
        return lambda idx: _ratio(sum(parts[i][num] for i in idx),
                                  sum(parts[i][den] for i in idx))  # fmt: skip

    _figure(out, "position_consistency", n, r("ordered_consistent", "ordered_pairs"), rule)
    _figure(out, "position_consistency_with_flat", n, r("consistent", "pairs"), rule)
    _figure(out, "pair_instability", n, r("instability", "pairs"), rule)
    _figure(out, "top_choice_agreement", n, r("top_same", "top_pairs"), rule)
    # mean over groups with a full call
    _figure(out, "stability", n, r("stability_sum", "stability_n"), rule)
    _figure(out, "mean_abs_delta", n, r("delta_sum", "delta_n"), rule)
    _figure(out, "robustness_rate", n, r("robust", "robust_n"), rule)
    _explain(out, {
        "position_consistency": "no candidate pair was scored in two calls",
        "pair_instability": "no candidate pair was scored in two calls",
        "top_choice_agreement": "no two calls of a group scored every member",
        "stability": "no call of a group scored every member",
        "mean_abs_delta": "no candidate was scored in two calls",
        "robustness_rate": "no candidate was scored in two calls",
    })  # fmt: skip


def perturbation_bias(rows: pl.DataFrame, tolerance: float, rule: CIRule) -> dict[str, Any]:
    """Per perturbation name: delta_treated, delta_control, effect, robustness_rate (+ CIs)."""
    base = view_scores(rows, f"{PERM}0")
    pert = view_scores(rows, PERT)
    perturbed = list(rows.filter(pl.col("view").str.starts_with(PERT)).iter_rows(named=True))
    treated_of = {(r["group_id"], r["view"], r["candidate_id"]): bool(r["treated"])
                  for r in perturbed}  # fmt: skip
    base_of = {(r["group_id"], r["view"], r["candidate_id"]): r["base_id"] for r in perturbed}
    out: dict[str, Any] = {}
    for view in sorted({v for views in pert.values() for v in views}):
        per_group: list[dict[str, float]] = []
        for g, views in pert.items():
            if view not in views or f"{PERM}0" not in base.get(g, {}):
                continue
            p = _perturbed_group(views[view], base[g][f"{PERM}0"], g, view, treated_of,
                                 base_of, tolerance)  # fmt: skip
            if p["t_n"]:
                per_group.append(p)
        out[view.removeprefix(PERT)] = _perturbation_figures(per_group, tolerance, rule)
    return out


def _perturbed_group(scored: Scores, ref: Scores, g: str, view: str,
                     treated_of: dict[tuple[str, str, str], bool],
                     base_of: dict[tuple[str, str, str], str],
                     tolerance: float) -> dict[str, float]:  # fmt: skip
    """One group's sums: each perturbed candidate's score change from its original in the
    identity view, treated (the perturbation applied) and control apart."""
    p = {"t_sum": 0.0, "t_n": 0.0, "c_sum": 0.0, "c_n": 0.0, "robust": 0.0}
    for cid, (score, _slot) in scored.items():
        orig = base_of.get((g, view, cid))
        if orig not in ref:
            continue
        delta = score - ref[orig][0]
        if treated_of.get((g, view, cid)):
            p["t_sum"] += delta
            p["t_n"] += 1
            p["robust"] += float(abs(delta) <= tolerance)
        else:
            p["c_sum"] += delta
            p["c_n"] += 1
    return p


def _perturbation_figures(per_group: list[dict[str, float]], tolerance: float,
                          rule: CIRule) -> dict[str, Any]:  # fmt: skip
    fig: dict[str, Any] = {"n_groups": len(per_group), "tolerance": tolerance}
    n = len(per_group)
    if not n:
        fig["reason"] = "no perturbed candidate has a score in both views"
        return fig

    def r(num: str, den: str) -> Callable[[np.ndarray], float | None]:
        return lambda idx: _ratio(sum(per_group[i][num] for i in idx),
                                  sum(per_group[i][den] for i in idx))  # fmt: skip

    def effect(idx: np.ndarray) -> float | None:
        t, c = r("t_sum", "t_n")(idx), r("c_sum", "c_n")(idx)
        return None if t is None or c is None else t - c  # no controls: no controlled effect

    _figure(fig, "delta_treated", n, r("t_sum", "t_n"), rule)
    _figure(fig, "delta_control", n, r("c_sum", "c_n"), rule)
    _figure(fig, "effect", n, effect, rule)
    _figure(fig, "robustness_rate", n, r("robust", "t_n"), rule)
    no_control = "no unperturbed control was scored in both views"
    _explain(fig, {
        "delta_control": no_control,
        "effect": f"{no_control}: no controlled effect (delta_treated alone mixes "
        "the perturbation with call-to-call noise)",
    })  # fmt: skip
    fig["n_treated"] = int(sum(p["t_n"] for p in per_group))
    fig["n_control"] = int(sum(p["c_n"] for p in per_group))
    return fig


def _stratified_gap(own: pl.DataFrame, other: pl.DataFrame) -> float | None:
    """Own minus other mean score within each stratum of `passed` (pooled over tasks),
    weighted n_own * n_other / (n_own + n_other)."""
    num = den = 0.0
    for stratum in (True, False, None):
        sel = (pl.col("passed").is_null()) if stratum is None else (pl.col("passed") == stratum)
        a, b = own.filter(sel), other.filter(sel)
        if a.height and b.height:
            w = a.height * b.height / (a.height + b.height)
            num += w * (a["score"].mean() - b["score"].mean())
            den += w
    return num / den if den else None


def _matched_cells(own: pl.DataFrame, other: pl.DataFrame) -> list[tuple[float, float]]:
    """(own mean - other mean, weight n_own * n_other / (n_own + n_other)) per cell of one
    task (group) and one known test verdict holding candidates of both."""
    cells = []
    for (g, passed), a in own.filter(pl.col("passed").is_not_null()).group_by("group_id", "passed"):
        b = other.filter((pl.col("group_id") == g) & (pl.col("passed") == passed))
        if b.height:
            w = a.height * b.height / (a.height + b.height)
            cells.append((float(a["score"].mean() - b["score"].mean()), w))
    return cells


def self_preference(
    rows: pl.DataFrame,
    judge_model: str,
    judge_family: str,
    rule: CIRule,
) -> dict[str, Any]:
    """Policy-by-judge row of the matrix and the self/family gaps (+ CIs), clustered by task:
    `n_tasks` counts the tasks with a scored self-preference candidate, each figure's
    `<figure>_n_groups` the tasks that contribute to it (a gap: the tasks with a matched cell),
    and a figure has a CI only from `rule.min_ci_groups` of them (`ratio_with_ci`)."""
    sel = _scored(rows).filter(
        pl.col("view").str.starts_with(PERM) & pl.col("policy").is_not_null()
    )
    cand = sel.group_by(
        "task_id", "group_id", "candidate_id", "policy", "policy_family", "passed"
    ).agg(pl.col("score").mean())
    out: dict[str, Any] = {"judge_model": judge_model, "judge_family": judge_family}
    tasks = sorted(cand["task_id"].unique().to_list()) if cand.height else []
    out["n_tasks"] = len(tasks)
    out["n_candidates"] = cand.height
    if not tasks:
        out["reason"] = "no self-preference group was scored"
        return out
    by_task = [cand.filter(pl.col("task_id") == t) for t in tasks]
    matrix: dict[str, Any] = {}
    for policy in sorted(cand["policy"].unique().to_list()):
        own = [t.filter(pl.col("policy") == policy)["score"] for t in by_task]
        matrix[policy] = ratio_with_ci("mean", [float(x.sum()) for x in own],
                                       [x.len() for x in own], rule, bounds=(0.0, 1.0))  # fmt: skip
    out["matrix"] = matrix
    for kind in ("self", "family"):
        _gap_figures(out, kind, cand, by_task, rule)
    return out


def _gap_figures(out: dict[str, Any], kind: str, cand: pl.DataFrame,
                 by_task: list[pl.DataFrame], rule: CIRule) -> None:  # fmt: skip
    """`<kind>_gap`: own minus another family's candidates matched on task and test verdict,
    the weighted mean over the matched cells (a ratio of per-task sums); `<kind>_gap_unmatched`:
    the gap within verdict strata pooled over tasks, which compares code of different tasks
    (and quality), with the jackknife t interval over the tasks holding own or other code;
    `<kind>_gap_confounded` is True when only it exists."""
    model, family = out["judge_model"], out["judge_family"]

    def split(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        if kind == "self":
            own = frame.filter(pl.col("policy") == model)
        else:
            own = frame.filter((pl.col("policy_family") == family) & (pl.col("policy") != model))
        return own, frame.filter(pl.col("policy_family") != family)

    name = f"{kind}_gap"
    cells = [_matched_cells(*split(t)) for t in by_task]
    num = [sum(d * w for d, w in c) for c in cells]
    den = [sum(w for _, w in c) for c in cells]
    out.update(ratio_with_ci(name, num, den, rule, bounds=(-1.0, 1.0)))
    holding = [t for t in by_task if any(part.height for part in split(t))]
    out.update(_pooled_gap(f"{name}_unmatched", holding, split, rule))
    out[f"n_{kind}_matched_cells"] = sum(len(c) for c in cells)
    out[f"{name}_confounded"] = out.get(name) is None and out.get(f"{name}_unmatched") is not None
    who = f"{model}" if kind == "self" else f"another {family} model"
    _explain(out, {
        name: f"no task has candidates from {who} and from another family with the same test "
        "verdict (the unmatched gap compares different tasks or quality: confounded)",
        f"{name}_unmatched": f"needs candidates from {who} and from another family in one "
        "test stratum",
    })  # fmt: skip


def _pooled_gap(
    name: str,
    tasks: list[pl.DataFrame],
    split: Callable[[pl.DataFrame], tuple[pl.DataFrame, pl.DataFrame]],
    rule: CIRule,
) -> dict[str, Any]:
    """`_stratified_gap` over `tasks` pooled, with R +- t_(n-1) jackknife SE over them (the
    truth figures' interval for a figure that is no ratio of per-task sums)."""
    n = len(tasks)

    def gap(keep: list[pl.DataFrame]) -> float | None:
        return _stratified_gap(*split(pl.concat(keep))) if keep else None

    value = gap(tasks)
    if value is None:
        interval = no_interval("no stratum holds both: the figure is undefined", n)
    elif rule.n_boot == 0:
        interval = no_interval(NO_BOOTSTRAP, n)
    else:
        loo = [gap(tasks[:i] + tasks[i + 1 :]) for i in range(n)]
        jackknife = np.array([np.nan if v is None else v for v in loo], dtype=float)
        interval = t_ci(value, jackknife, n, rule.min_ci_groups, rule.level)
    return {name: value, **interval.fields(name)}
