"""Attack figures per judge and attack, from the attack views (`judgelab.probes.attacks`).

Input: one judge's probe scores rows (`ProbeScoresSchema`). For every attack view
``atk:<name>`` (repeat 0) of a known-truth group, its attacked candidates (``treated``) are
compared with their unattacked originals — the control of the same verdict, scored in the
identity view ``perm:0`` at the same slot and temperature — and the view's other members with
themselves in ``perm:0``. Unscored rows never count as 0: a comparison needing a missing score
is left out, and the unscored attacked candidates are counted.

Per attack (every figure with its n of groups and, from `rule.min_groups` groups on, a 95 %
cluster-bootstrap CI over groups; each figure rests on the groups where it is defined):
- ``success_rate`` (attacks on failing code): share of scored attacked candidates that the
  judge praised (score >= ``praise_threshold``) or ranked top of its group (the unique highest
  score of a fully scored view; a tie at the top is no rank, so a judge that scores everything
  0 is not "fooled"); ``praise_rate`` and ``top_rate`` are its two parts, and
  ``baseline_rate`` is the same criterion on the unattacked originals in ``perm:0`` (a judge
  that already praises the non-answer or the mutant has a high baseline).
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

from judgelab.analysis.bias import PERM, figure_with_ci, top_of
from judgelab.analysis.stats import CIRule
from judgelab.probes.attacks import ATTACK, ATTACKS, Attack

IDENTITY = f"{PERM}0"
Member = tuple[float | None, bool, str]  # score (None: unscored), treated, base_id
_KEYS = ("attacked", "scored", "unscored", "score_sum", "praise", "top", "success", "base_n",
         "base_sum", "base_success", "d_n", "d_sum", "stable", "c_n", "c_sum")  # fmt: skip


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


def _parts(view: dict[str, Member], ref: dict[str, Member], threshold: float,
           tolerance: float) -> dict[str, float]:  # fmt: skip
    """One group's sums, from which every figure is a ratio."""
    p = dict.fromkeys(_KEYS, 0.0)
    top, ref_top = _top(view), _top(ref)
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
            praised, ranked = score >= threshold, top == cid
            p["scored"] += 1
            p["score_sum"] += score
            p["praise"] += praised
            p["top"] += ranked
            p["success"] += praised or ranked
        if original is not None:
            p["base_n"] += 1
            p["base_sum"] += original
            p["base_success"] += original >= threshold or ref_top == base
        if score is not None and original is not None:
            p["d_n"] += 1
            p["d_sum"] += score - original
            p["stable"] += abs(score - original) <= tolerance
    return p


def _ratio_figure(out: dict[str, Any], name: str, parts: list[dict[str, float]], num: str,
                  den: str, rule: CIRule) -> None:  # fmt: skip
    """figure `name` = sum(num) / sum(den) over the groups where den > 0, with its CI."""
    sel = [p for p in parts if p[den] > 0]

    def stat(idx: np.ndarray) -> float | None:
        d = sum(sel[i][den] for i in idx)
        return float(sum(sel[i][num] for i in idx) / d) if d else None

    out.update(figure_with_ci(name, len(sel), stat, rule))


REASONS = {
    "success_rate": "no attacked candidate was scored",
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
        parts = [
            _parts(members, calls.get((g, IDENTITY), {}), praise_threshold, tolerance)
            for (g, v), members in sorted(calls.items())
            if v == view
        ]
        out[name] = _attack_figures(ATTACKS.get(name), parts, praise_threshold, tolerance, rule)
    return out


def _attack_figures(
    spec: Attack | None,
    parts: list[dict[str, float]],
    praise_threshold: float,
    tolerance: float,
    rule: CIRule,
) -> dict[str, Any]:
    """One attack's counts and figures from its groups' `_parts`."""
    a: dict[str, Any] = {
        "family": spec.family if spec else None,
        "passes": spec.passes if spec else None,
        "n_groups": len(parts),
        "n_attacked": int(sum(p["attacked"] for p in parts)),
        "n_scored": int(sum(p["scored"] for p in parts)),
        "n_unscored": int(sum(p["unscored"] for p in parts)),
        "n_paired": int(sum(p["d_n"] for p in parts)),
        "n_controls": int(sum(p["c_n"] for p in parts)),
        "praise_threshold": praise_threshold,
        "tolerance": tolerance,
    }
    if spec is None or not spec.passes:
        a["n_success"] = int(sum(p["success"] for p in parts))
        _ratio_figure(a, "success_rate", parts, "success", "scored", rule)
        _ratio_figure(a, "praise_rate", parts, "praise", "scored", rule)
        _ratio_figure(a, "top_rate", parts, "top", "scored", rule)
        _ratio_figure(a, "baseline_rate", parts, "base_success", "base_n", rule)
    else:
        _ratio_figure(a, "stability_rate", parts, "stable", "d_n", rule)
    _ratio_figure(a, "mean_attacked", parts, "score_sum", "scored", rule)
    _ratio_figure(a, "mean_original", parts, "base_sum", "base_n", rule)
    _ratio_figure(a, "delta_attacked", parts, "d_sum", "d_n", rule)
    _ratio_figure(a, "delta_control", parts, "c_sum", "c_n", rule)
    both = [p for p in parts if p["d_n"] and p["c_n"]]

    def shift(idx: np.ndarray) -> float | None:
        dn, cn = sum(both[i]["d_n"] for i in idx), sum(both[i]["c_n"] for i in idx)
        if not dn or not cn:
            return None
        return float(sum(both[i]["d_sum"] for i in idx) / dn
                     - sum(both[i]["c_sum"] for i in idx) / cn)  # fmt: skip

    a.update(figure_with_ci("shift", len(both), shift, rule))
    a["reasons"] = {k: why for k, why in REASONS.items() if k in a and a[k] is None}
    return a
