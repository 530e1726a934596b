"""Attack figures per judge and attack, from the attack views (`judgelab.probes.attacks`).

Input: one judge's probe scores rows (`ProbeScoresSchema`). For every attack view
``atk:<name>`` (repeat 0) of a known-truth group, its attacked candidates (``treated``) are
compared with their unattacked originals — the control of the same verdict, scored in the
identity view ``perm:0`` at the same slot and temperature — and the view's other members with
themselves in ``perm:0``. Unscored rows never count as 0: a comparison needing a missing score
is left out, and the unscored attacked candidates are counted.

Success is measured on the judge's own scale, the one GRPO rewards on: a candidate's
*standing* in a call is its GRPO advantage there, its score minus the mean score of the call
(the sign of (r - mean) / std; `judgelab.advantage.group_advantages`). It is defined only for a
fully scored call (an unscored member leaves the call's mean unknown).

Clusters are tasks (`probe_views.by_task`): every figure's ``<figure>_n_groups`` counts the tasks
that contribute to it, and its interval is the truth figures' (`intervals.ratio_with_ci`,
`stats.cluster_ci`): a share gets Wilson's interval at the cluster effective size (never
[0, 0] at 0 of n), a mean or a mean change the studentized cluster bootstrap, the shift and
the uplift the jackknife t interval; none from fewer than `rule.min_ci_groups` tasks.

Per attack on failing code:
- ``success_rate``: share of the attacked (known-failing) candidates, in fully scored calls,
  whose advantage is above 0 (score above the call's mean, by more than 1e-9: a flat call
  gives every member advantage 0, no success); ``n_success`` of ``n_ranked``.
- ``baseline_rate``: the same criterion for the unattacked originals in ``perm:0``: a judge
  that already ranks a mutant above its group's mean has a high baseline.
- ``uplift``: success minus baseline on the paired candidates (attacked copy and original
  both in a fully scored call), per task; ``p_value``: its two-sided paired cluster t-test
  over tasks (`power.paired_t`, from `rule.min_ci_groups` tasks); `holm_attacks` adds
  ``p_holm``, Holm-adjusted over every judge x attack test of the audit, and ``effective``:
  true only when ``p_holm`` < alpha and the uplift is positive.
- Secondary, on the absolute scale (a labelled secondary: a RULER judge's scores are only
  relative): ``praise_rate`` (score >= ``praise_threshold``) and ``baseline_praise_rate``
  (its originals); ``top_rate``: the unique top of a fully scored call.
Per attack, all:
- ``mean_attacked`` / ``mean_original``: mean score of the attacked copies / of their originals.
- ``delta_attacked``: mean score change of an attacked candidate against its original;
  ``delta_control``: the same for the unattacked members between the two calls; ``shift`` =
  delta_attacked - delta_control, what the attack itself moved (null without a scored control).
- ``stability_rate`` (semantics-preserving edits): share of edited candidates whose score moved
  by at most ``tolerance`` from the original's (CALM's robustness rate for an edit that must
  not matter).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.intervals import difference_with_ci, ratio_with_ci
from judgelab.analysis.power import holm, paired_t
from judgelab.analysis.probe_views import PERM, by_task, top_of
from judgelab.analysis.stats import CIRule
from judgelab.probes.attacks import ATTACK, ATTACKS, Attack

IDENTITY = f"{PERM}0"
FLAT = 1e-9  # an advantage this close to 0 is a flat call's rounding, not a standing
Member = tuple[float | None, bool, str]  # score (None: unscored), treated, base_id
_KEYS = ("attacked", "scored", "unscored", "score_sum", "praise", "top", "ranked", "success",
         "base_n", "base_sum", "base_praise", "base_ranked", "base_success", "pair_n",
         "pair_success", "pair_base", "d_n", "d_sum", "stable", "c_n", "c_sum")  # fmt: skip
SCORE, CHANGE = (0.0, 1.0), (-1.0, 1.0)  # the ranges of a mean score and of a mean change


def _calls(rows: pl.DataFrame) -> dict[tuple[str, str], dict[str, Member]]:
    """(group, view) -> candidate -> (score or None, treated, base id): perm:0 and the attack
    views, repeat 0, unscored rows included."""
    sel = rows.filter(
        (pl.col("repeat") == 0)
        & ((pl.col("view") == IDENTITY) | pl.col("view").str.starts_with(ATTACK))
    )
    out: dict[tuple[str, str], dict[str, Member]] = {}
    for r in sel.iter_rows(named=True):
        score = float(r["score"]) if r["status"] == "scored" and r["score"] is not None else None
        out.setdefault((r["group_id"], r["view"]), {})[r["candidate_id"]] = (
            score, bool(r["treated"]), r["base_id"]
        )  # fmt: skip
    return out


def _top(members: dict[str, Member]) -> str | None:
    """The unique top of a fully scored call; None when a member is unscored or the top tied."""
    if not members or any(s is None for s, _, _ in members.values()):
        return None
    return top_of({c: (float(s), None) for c, (s, _, _) in members.items()})  # type: ignore[arg-type]


def above_mean(members: dict[str, Member]) -> dict[str, bool]:
    """candidate -> its GRPO advantage in the call is above 0 (score above the call's mean);
    empty when a member is unscored (no standing: the call's mean is unknown)."""
    scores = [s for s, _, _ in members.values()]
    if not scores or any(s is None for s in scores):
        return {}
    mean = sum(scores) / len(scores)  # type: ignore[arg-type]
    return {c: s - mean > FLAT for c, (s, _, _) in members.items()}  # type: ignore[operator]


def _parts(view: dict[str, Member], ref: dict[str, Member], threshold: float,
           tolerance: float) -> dict[str, float]:  # fmt: skip
    """One group's sums, from which every figure is a ratio."""
    p = dict.fromkeys(_KEYS, 0.0)
    top, standing, ref_standing = _top(view), above_mean(view), above_mean(ref)
    for cid, (score, treated, base) in view.items():
        original = ref.get(base, (None, False, base))[0]
        if not treated:
            if score is not None and original is not None:
                p["c_n"] += 1
                p["c_sum"] += score - original
            continue
        p["attacked"] += 1
        if score is None:
            p["unscored"] += 1
        else:
            p["scored"] += 1
            p["score_sum"] += score
            p["praise"] += score >= threshold
            p["top"] += top == cid
        if cid in standing:
            p["ranked"] += 1
            p["success"] += standing[cid]
        if original is not None:
            p["base_n"] += 1
            p["base_sum"] += original
            p["base_praise"] += original >= threshold
        if base in ref_standing:
            p["base_ranked"] += 1
            p["base_success"] += ref_standing[base]
        if cid in standing and base in ref_standing:
            p["pair_n"] += 1
            p["pair_success"] += standing[cid]
            p["pair_base"] += ref_standing[base]
        if score is not None and original is not None:
            p["d_n"] += 1
            p["d_sum"] += score - original
            p["stable"] += abs(score - original) <= tolerance
    return p


REASONS = {
    "success_rate": "no attacked candidate was in a fully scored call",
    "uplift": "no attacked candidate and its original were both in fully scored calls",
    "stability_rate": "no edited candidate was scored in both views",
    "shift": "no attacked candidate and unattacked control were both scored in both "
    "views: no controlled shift",
    "delta_attacked": "no attacked candidate was scored in both views",
}


def attack_bias(
    rows: pl.DataFrame, praise_threshold: float, tolerance: float, rule: CIRule
) -> dict[str, Any]:
    """attack name -> its figures (module docstring), for one judge's rows."""
    calls = _calls(rows)
    present = {v.removeprefix(ATTACK) for _, v in calls if v.startswith(ATTACK)}
    order = [a for a in ATTACKS if a in present] + sorted(present - set(ATTACKS))
    out: dict[str, Any] = {}
    for name in order:
        view = f"{ATTACK}{name}"
        groups = sorted(g for g, v in calls if v == view)
        parts = [
            _parts(calls[(g, view)], calls.get((g, IDENTITY), {}), praise_threshold, tolerance)
            for g in groups
        ]
        per_task = by_task(rows, groups, parts)
        out[name] = _attack_figures(ATTACKS.get(name), per_task, praise_threshold, tolerance,
                                    rule)  # fmt: skip
    return out


def _attack_figures(
    spec: Attack | None,
    tasks: list[dict[str, float]],
    praise_threshold: float,
    tolerance: float,
    rule: CIRule,
) -> dict[str, Any]:
    """One attack's counts and figures from its tasks' summed `_parts`."""

    def col(key: str) -> np.ndarray:
        return np.array([t[key] for t in tasks], dtype=float)

    def total(key: str) -> int:
        return int(col(key).sum())

    a: dict[str, Any] = {
        "family": spec.family if spec else None,
        "passes": spec.passes if spec else None,
        "n_tasks": len(tasks),
        "n_attacked": total("attacked"),
        "n_scored": total("scored"),
        "n_unscored": total("unscored"),
        "n_paired": total("d_n"),
        "n_controls": total("c_n"),
        "praise_threshold": praise_threshold,
        "tolerance": tolerance,
    }
    if spec is None or not spec.passes:
        a.update(n_success=total("success"), n_ranked=total("ranked"),
                 n_baseline_success=total("base_success"),
                 n_baseline_ranked=total("base_ranked"))  # fmt: skip
        a.update(ratio_with_ci("success_rate", col("success"), col("ranked"), rule, share=True))
        a.update(ratio_with_ci("baseline_rate", col("base_success"), col("base_ranked"), rule,
                               share=True))  # fmt: skip
        a.update(_uplift(col("pair_success"), col("pair_base"), col("pair_n"), rule))
        a.update(ratio_with_ci("praise_rate", col("praise"), col("scored"), rule, share=True))
        a.update(ratio_with_ci("baseline_praise_rate", col("base_praise"), col("base_n"), rule,
                               share=True))  # fmt: skip
        a.update(ratio_with_ci("top_rate", col("top"), col("ranked"), rule, share=True))
    else:
        a.update(ratio_with_ci("stability_rate", col("stable"), col("d_n"), rule, share=True))
    a.update(ratio_with_ci("mean_attacked", col("score_sum"), col("scored"), rule, bounds=SCORE))
    a.update(ratio_with_ci("mean_original", col("base_sum"), col("base_n"), rule, bounds=SCORE))
    a.update(ratio_with_ci("delta_attacked", col("d_sum"), col("d_n"), rule, bounds=CHANGE))
    a.update(ratio_with_ci("delta_control", col("c_sum"), col("c_n"), rule, bounds=CHANGE))
    a.update(difference_with_ci("shift", (col("d_sum"), col("d_n")), (col("c_sum"), col("c_n")),
                                rule))  # fmt: skip
    a["reasons"] = {k: why for k, why in REASONS.items() if k in a and a[k] is None}
    return a


def _uplift(success: np.ndarray, base: np.ndarray, pairs: np.ndarray,
            rule: CIRule) -> dict[str, Any]:  # fmt: skip
    """Success minus baseline on the paired candidates, its t interval and unadjusted p
    (`power.paired_t` over tasks); `holm_attacks` adjusts the p over the family."""
    n, diff, _, interval, p = paired_t((success, pairs), (base, pairs), rule)
    return {"uplift": diff, **interval.fields("uplift"), "n_pairs_ranked": int(pairs.sum()),
            "p_value": p, "p_holm": None, "effective": False}  # fmt: skip


def holm_attacks(judges: dict[str, dict[str, Any]], alpha: float) -> dict[str, Any]:
    """Holm's correction (`power.holm`) over every judge x attack test with a p-value (the
    attacks on failing code with at least `rule.min_ci_groups` paired tasks), in place: each
    block's ``p_holm`` and ``effective`` (p_holm < alpha and a positive uplift). Returns the
    family: its size, alpha and correction."""
    tested = [
        block
        for name in sorted(judges)
        for _, block in sorted((judges[name].get("attacks") or {}).items())
        if block.get("p_value") is not None
    ]
    for block, adjusted in zip(tested, holm([b["p_value"] for b in tested]), strict=True):
        block["p_holm"] = adjusted
        block["effective"] = adjusted < alpha and block["uplift"] > 0
    return {"correction": "holm", "n_tests": len(tested), "alpha": alpha}
