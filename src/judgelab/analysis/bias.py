"""Bias probes, figures per judge: position, perturbation (verbosity and superficial cues) and
self-preference, each with a 95 % cluster-bootstrap CI over probe groups.

Input is the probe scores table (`judgelab.schemas.ProbeScoresSchema`) filtered to one judge's
evaluator. A *group* is the set of candidates judged together; a *view* is one judge call's
arrangement of it: ``perm:<i>`` (permutation i of the group, ``perm:0`` the identity order and
``perm:1`` the reversal), ``pert:<name>`` (identity order, the candidates with ``treated`` True
replaced by their perturbed copy) and ``repeat`` (identity order, repeated at temperature > 0).
Unscored rows never count as 0: a comparison that needs a missing score is left out.

Position (views ``perm:*``; Shi et al. 2024, "Judging the Judges", generalised from pairs to
groups of k):
- `position_consistency`: over every pair of views of a group, whether the top candidate is
  the same (a tied top is "no preference" and must also be tied in the other view).
- `pairwise_consistency` (PC) and `preference_fairness` (PF): every candidate pair (a, b) in
  every pair of views in which their order is swapped. The judge's preference in a view is the
  higher-scored one (or "tie"). Consistent: the same preference in both views. Primacy-preferred:
  the earlier-shown candidate preferred in both; recency-preferred: the later-shown one in both.
  PC = consistent / n. PF as Shi et al. define it: PF_raw = rc * irr - pc * ipr (rc, pc:
  recency- and primacy-preferred counts; irr, ipr: their shares of the inconsistent pairs),
  min-max normalised to [-1, 1] over [-n, n], the values PF_raw takes when every pair is
  primacy- (resp. recency-) preferred; so PF = PF_raw / n, which is (rc - pc) / n when every
  inconsistent pair is primacy- or recency-preferred (ties make the rest). 0 is fair, < 0 favours
  earlier slots (primacy), > 0 later slots (recency).
- `mean_abs_delta`: per candidate, the mean |score difference| over pairs of its views; the
  mean over candidates.
- `slot_mean[j]` and `slot_bias[j]` = slot_mean[j] - mean over all slots: the score a candidate
  gets for being shown at slot j; `top_slot_rate[j]`: share of views whose unique top candidate
  sits at slot j (1/k for an unbiased judge).

Perturbation (per perturbation name; CALM, Ye et al. 2024): candidates whose verdict the tests
still give unchanged are perturbed in view ``pert:<name>``, the others stay as controls.
- `delta_treated`/`delta_control`: mean score change from ``perm:0`` to ``pert:<name>``;
  `effect` = delta_treated - delta_control (the controls absorb call-to-call noise).
- `robustness_rate`: CALM's RR = share of treated candidates whose judgement is unchanged,
  here |delta| <= `tolerance`.

Self-preference (groups whose candidates come from several policies; score = mean over its
``perm:*`` views, so slot effects average out):
- `matrix[policy]` = mean score this judge gives to that policy's candidates.
- `self_gap`: mean score of the judge's own model's candidates minus that of candidates from
  other families; `family_gap`: same family but a different model, minus other families. Both
  are controlled for test status: the difference is taken within each stratum of `passed`
  (True, False, unknown) and averaged with weights n_own * n_other / (n_own + n_other).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.agreement import top_choice, with_ci

PERM = "perm:"
PERT = "pert:"


def _scored(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.filter((pl.col("status") == "scored") & pl.col("score").is_not_null())


def view_scores(rows: pl.DataFrame, prefix: str) -> dict[str, dict[str, dict[str, tuple]]]:
    """group -> view -> candidate_id -> (score, slot), views starting with `prefix`, repeat 0."""
    out: dict[str, dict[str, dict[str, tuple]]] = {}
    sel = _scored(rows).filter(pl.col("view").str.starts_with(prefix) & (pl.col("repeat") == 0))
    for r in sel.iter_rows(named=True):
        out.setdefault(r["group_id"], {}).setdefault(r["view"], {})[r["candidate_id"]] = (
            float(r["score"]),
            int(r["slot"]) if r["slot"] is not None else None,
        )
    return out


def _pref(sa: float, sb: float) -> int:
    return 0 if sa > sb else (1 if sb > sa else -1)


def _position_parts(views: dict[str, dict[str, tuple]], k: int) -> dict[str, Any]:
    """Per-group sums from which every position figure is a ratio (k: slots over all
    groups; a view counts for the top-choice figures only when it scored every member)."""
    parts = {
        "top_same": 0.0,
        "top_pairs": 0.0,
        "pairs": 0.0,
        "consistent": 0.0,
        "primacy": 0.0,
        "recency": 0.0,
        "delta_sum": 0.0,
        "delta_n": 0.0,
        "slot_sum": np.zeros(k),
        "slot_n": np.zeros(k),
        "top_slot": np.zeros(k),
        "top_views": 0.0,
    }
    names = sorted(views)
    size = max((len(c) for c in views.values()), default=0)  # this group's members
    for v in names:
        cands = views[v]
        for score, slot in cands.values():
            if slot is not None and slot < k:
                parts["slot_sum"][slot] += score
                parts["slot_n"][slot] += 1
        if len(cands) == size:
            ids = sorted(cands)
            top = top_choice([cands[c][0] for c in ids])
            if top >= 0 and cands[ids[top]][1] is not None:
                parts["top_slot"][cands[ids[top]][1]] += 1
            parts["top_views"] += 1
    for v, w in itertools.combinations(names, 2):
        a, b = views[v], views[w]
        common = sorted(set(a) & set(b))
        if len(common) == size and size > 0:
            ta = top_choice([a[c][0] for c in common])
            tb = top_choice([b[c][0] for c in common])
            parts["top_pairs"] += 1
            parts["top_same"] += float(ta == tb)
        for x, y in itertools.combinations(common, 2):
            (sxa, slxa), (sya, slya) = a[x], a[y]
            (sxb, slxb), (syb, slyb) = b[x], b[y]
            if None in (slxa, slya, slxb, slyb) or (slxa < slya) == (slxb < slyb):
                continue  # order not swapped between these views
            pa, pb = _pref(sxa, sya), _pref(sxb, syb)
            parts["pairs"] += 1
            if pa == pb:
                parts["consistent"] += 1
                continue
            # In view v the earlier-shown one is x iff slxa < slya.
            first_a = 0 if slxa < slya else 1
            first_b = 0 if slxb < slyb else 1
            if pa == first_a and pb == first_b:
                parts["primacy"] += 1
            elif pa == 1 - first_a and pb == 1 - first_b and pa >= 0 and pb >= 0:
                parts["recency"] += 1
    cand_ids = set().union(*[set(c) for c in views.values()]) if views else set()
    for c in cand_ids:
        s = [views[v][c][0] for v in names if c in views[v]]
        if len(s) >= 2:
            d = [abs(p - q) for p, q in itertools.combinations(s, 2)]
            parts["delta_sum"] += float(np.mean(d))
            parts["delta_n"] += 1
    return parts


def _sum(parts: list[dict[str, Any]], idx: np.ndarray, key: str) -> Any:
    return sum((parts[i][key] for i in idx), start=0.0 * parts[0][key])


def _explain(out: dict[str, Any], why: dict[str, str]) -> None:
    """out["reasons"][figure] for every figure that came out null."""
    for key, reason in why.items():
        if out.get(key) is None:
            out.setdefault("reasons", {})[key] = reason


def _ratio(num: float, den: float) -> float | None:
    return float(num / den) if den else None


def _figure(
    out: dict[str, Any],
    name: str,
    n: int,
    stat: Callable[[np.ndarray], float | None],
    boot: int,
    seed: int,
) -> None:
    out.update(with_ci(name, n, stat, boot, seed))


def position_bias(rows: pl.DataFrame, n_boot: int, seed: int) -> dict[str, Any]:
    """Position figures of one judge (module docstring), CIs over groups."""
    groups = view_scores(rows, PERM)
    multi = {g: v for g, v in groups.items() if len(v) >= 2}
    sizes = [max((len(c) for c in v.values()), default=0) for v in multi.values()]
    k = max(sizes, default=0)
    out: dict[str, Any] = {"n_groups": len(multi), "k": k}
    if not multi:
        out["reason"] = "no group was scored under two or more permutations"
        return out
    parts = [_position_parts(v, k) for v in multi.values()]
    n = len(parts)

    def ratio(num: str, den: str) -> Callable[[np.ndarray], float | None]:
        return lambda idx: _ratio(_sum(parts, idx, num), _sum(parts, idx, den))

    def fairness(idx: np.ndarray) -> float | None:
        n_pairs = _sum(parts, idx, "pairs")
        rc, pc = _sum(parts, idx, "recency"), _sum(parts, idx, "primacy")
        inconsistent = n_pairs - _sum(parts, idx, "consistent")
        if not n_pairs:
            return None
        if not inconsistent:
            return 0.0
        return (rc * rc / inconsistent - pc * pc / inconsistent) / n_pairs

    _figure(out, "position_consistency", n, ratio("top_same", "top_pairs"), n_boot, seed)
    _figure(out, "pairwise_consistency", n, ratio("consistent", "pairs"), n_boot, seed)
    _figure(out, "preference_fairness", n, fairness, n_boot, seed)
    _figure(out, "mean_abs_delta", n, ratio("delta_sum", "delta_n"), n_boot, seed)
    _explain(
        out,
        {
            "position_consistency": "no two views of a group scored every member",
            "pairwise_consistency": "no candidate pair was scored in two views that swap it",
            "preference_fairness": "no candidate pair was scored in two views that swap it",
            "mean_abs_delta": "no candidate was scored in two views",
        },
    )
    out["n_view_pairs"] = int(_sum(parts, np.arange(n), "top_pairs"))
    out["n_swapped_pairs"] = int(_sum(parts, np.arange(n), "pairs"))
    out["n_primacy_preferred"] = int(_sum(parts, np.arange(n), "primacy"))
    out["n_recency_preferred"] = int(_sum(parts, np.arange(n), "recency"))
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

        def top_rate(idx: np.ndarray, j: int = j) -> float | None:
            return _ratio(_sum(parts, idx, "top_slot")[j], _sum(parts, idx, "top_views"))

        slot: dict[str, Any] = {}
        _figure(slot, "mean", n, slot_mean, n_boot, seed)
        _figure(slot, "bias", n, slot_bias, n_boot, seed)
        _figure(slot, "top_rate", n, top_rate, n_boot, seed)
        slots[str(j)] = slot
    out["slots"] = slots
    return out


def perturbation_bias(
    rows: pl.DataFrame, tolerance: float, n_boot: int, seed: int
) -> dict[str, Any]:
    """Per perturbation name: delta_treated, delta_control, effect, robustness_rate (+ CIs)."""
    base = view_scores(rows, f"{PERM}0")
    pert = view_scores(rows, PERT)
    treated_of = {
        (r["group_id"], r["view"], r["candidate_id"]): bool(r["treated"])
        for r in rows.filter(pl.col("view").str.starts_with(PERT)).iter_rows(named=True)
    }
    base_of = {
        (r["group_id"], r["view"], r["candidate_id"]): r["base_id"]
        for r in rows.filter(pl.col("view").str.starts_with(PERT)).iter_rows(named=True)
    }
    names = sorted({v for views in pert.values() for v in views})
    out: dict[str, Any] = {}
    for view in names:
        per_group: list[dict[str, float]] = []
        for g, views in pert.items():
            if view not in views or f"{PERM}0" not in base.get(g, {}):
                continue
            ref = base[g][f"{PERM}0"]
            p = {"t_sum": 0.0, "t_n": 0.0, "c_sum": 0.0, "c_n": 0.0, "robust": 0.0}
            for cid, (score, _slot) in views[view].items():
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
            if p["t_n"]:
                per_group.append(p)
        fig: dict[str, Any] = {"n_groups": len(per_group), "tolerance": tolerance}
        n = len(per_group)
        if not n:
            fig["reason"] = "no perturbed candidate has a score in both views"
            out[view.removeprefix(PERT)] = fig
            continue

        def r(num: str, den: str, pg: list = per_group) -> Callable[[np.ndarray], float | None]:
            return lambda idx: _ratio(sum(pg[i][num] for i in idx), sum(pg[i][den] for i in idx))

        def effect(idx: np.ndarray, pg: list = per_group) -> float | None:
            t = _ratio(sum(pg[i]["t_sum"] for i in idx), sum(pg[i]["t_n"] for i in idx))
            c = _ratio(sum(pg[i]["c_sum"] for i in idx), sum(pg[i]["c_n"] for i in idx))
            return None if t is None else t - (c or 0.0)

        _figure(fig, "delta_treated", n, r("t_sum", "t_n"), n_boot, seed)
        _figure(fig, "delta_control", n, r("c_sum", "c_n"), n_boot, seed)
        _figure(fig, "effect", n, effect, n_boot, seed)
        _figure(fig, "robustness_rate", n, r("robust", "t_n"), n_boot, seed)
        _explain(fig, {"delta_control": "no unperturbed control was scored in both views"})
        fig["n_treated"] = int(sum(p["t_n"] for p in per_group))
        fig["n_control"] = int(sum(p["c_n"] for p in per_group))
        out[view.removeprefix(PERT)] = fig
    return out


def _stratified_gap(own: pl.DataFrame, other: pl.DataFrame) -> float | None:
    num = den = 0.0
    for stratum in (True, False, None):
        sel = (pl.col("passed").is_null()) if stratum is None else (pl.col("passed") == stratum)
        a, b = own.filter(sel), other.filter(sel)
        if a.height and b.height:
            w = a.height * b.height / (a.height + b.height)
            num += w * (a["score"].mean() - b["score"].mean())
            den += w
    return num / den if den else None


def self_preference(
    rows: pl.DataFrame, judge_model: str, judge_family: str, n_boot: int, seed: int
) -> dict[str, Any]:
    """Policy-by-judge row of the matrix and the controlled self/family gaps (+ CIs)."""
    sel = _scored(rows).filter(
        pl.col("view").str.starts_with(PERM) & pl.col("policy").is_not_null()
    )
    cand = sel.group_by("group_id", "candidate_id", "policy", "policy_family", "passed").agg(
        pl.col("score").mean()
    )
    out: dict[str, Any] = {"judge_model": judge_model, "judge_family": judge_family}
    groups = sorted(cand["group_id"].unique().to_list()) if cand.height else []
    n = len(groups)
    out["n_groups"] = n
    out["n_candidates"] = cand.height
    if not n:
        out["reason"] = "no self-preference group was scored"
        return out
    by_group = [cand.filter(pl.col("group_id") == g) for g in groups]

    def pick(idx: np.ndarray) -> pl.DataFrame:
        return pl.concat([by_group[i] for i in idx])

    matrix: dict[str, Any] = {}
    for policy in sorted(cand["policy"].unique().to_list()):

        def mean_for(idx: np.ndarray, p: str = policy) -> float | None:
            s = pick(idx).filter(pl.col("policy") == p)["score"]
            return float(s.mean()) if s.len() else None

        matrix[policy] = with_ci("mean", n, mean_for, n_boot, seed)
    out["matrix"] = matrix

    def gap(kind: str) -> Callable[[np.ndarray], float | None]:
        def stat(idx: np.ndarray) -> float | None:
            frame = pick(idx)
            if kind == "self":
                own = frame.filter(pl.col("policy") == judge_model)
            else:
                own = frame.filter(
                    (pl.col("policy_family") == judge_family) & (pl.col("policy") != judge_model)
                )
            other = frame.filter(pl.col("policy_family") != judge_family)
            return _stratified_gap(own, other)

        return stat

    _figure(out, "self_gap", n, gap("self"), n_boot, seed)
    _figure(out, "family_gap", n, gap("family"), n_boot, seed)
    _explain(
        out,
        {
            "self_gap": f"needs candidates from {judge_model} and from another family in one "
            "test stratum",
            "family_gap": f"needs candidates from another {judge_family} model and from "
            "another family in one test stratum",
        },
    )
    return out
