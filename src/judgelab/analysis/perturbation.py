"""Perturbation bias (verbosity and superficial cues), figures per judge and perturbation
(the table and views: `probe_views`).

Perturbation (per perturbation name; CALM, Ye et al. 2024): candidates whose verdict the tests
still give unchanged are perturbed in view ``pert:<name>``, the others stay as controls.
- `delta_treated`/`delta_control`: mean score change from ``perm:0`` to ``pert:<name>``;
  `effect` = delta_treated - delta_control (the controls absorb call-to-call noise); without a
  scored control there is no controlled effect (null, with the reason), never delta_treated.
- `robustness_rate`: CALM's RR = share of treated candidates whose judgement is unchanged,
  here |delta| <= `tolerance`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.probe_views import (
    PERM,
    PERT,
    Scores,
    add_figure,
    explain,
    ratio_or_none,
    view_scores,
)
from judgelab.analysis.stats import CIRule


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
        return lambda idx: ratio_or_none(sum(per_group[i][num] for i in idx),
                                  sum(per_group[i][den] for i in idx))  # fmt: skip

    def effect(idx: np.ndarray) -> float | None:
        t, c = r("t_sum", "t_n")(idx), r("c_sum", "c_n")(idx)
        return None if t is None or c is None else t - c  # no controls: no controlled effect

    add_figure(fig, "delta_treated", n, r("t_sum", "t_n"), rule)
    add_figure(fig, "delta_control", n, r("c_sum", "c_n"), rule)
    add_figure(fig, "effect", n, effect, rule)
    add_figure(fig, "robustness_rate", n, r("robust", "t_n"), rule)
    no_control = "no unperturbed control was scored in both views"
    explain(fig, {
        "delta_control": no_control,
        "effect": f"{no_control}: no controlled effect (delta_treated alone mixes "
        "the perturbation with call-to-call noise)",
    })  # fmt: skip
    fig["n_treated"] = int(sum(p["t_n"] for p in per_group))
    fig["n_control"] = int(sum(p["c_n"] for p in per_group))
    return fig
