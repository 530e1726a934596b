"""What every bias probe shares: the probe scores table read as groups and views, the top of a
view, a pair's preference, the task clusters and the figure plumbing.

Bias probes, figures per judge: position, perturbation (verbosity and superficial cues),
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

The probes, one module each: `position` (`position_bias`), `noise_floor`, `perturbation`
(`perturbation_bias`) and `self_preference`; the intervals are `intervals`'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.intervals import figure_with_ci
from judgelab.analysis.stats import CIRule

PERM = "perm:"
PERT = "pert:"

Scores = dict[str, tuple[float, int | None]]  # candidate_id -> (score, slot)


def scored_rows(rows: pl.DataFrame) -> pl.DataFrame:
    return rows.filter((pl.col("status") == "scored") & pl.col("score").is_not_null())


def view_scores(rows: pl.DataFrame, prefix: str) -> dict[str, dict[str, Scores]]:
    """group -> view -> candidate_id -> (score, slot), views starting with `prefix`, repeat 0."""
    out: dict[str, dict[str, Scores]] = {}
    sel = scored_rows(rows).filter(pl.col("view").str.starts_with(prefix) & (pl.col("repeat") == 0))
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


def add_figure(
    out: dict[str, Any],
    name: str,
    n: int,
    stat: Callable[[np.ndarray], float | None],
    rule: CIRule,
) -> None:
    out.update(figure_with_ci(name, n, stat, rule))


def explain(out: dict[str, Any], why: dict[str, str]) -> None:
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


def ratio_or_none(num: float, den: float) -> float | None:
    return float(num / den) if den else None


def sum_over(parts: list[dict[str, Any]], idx: np.ndarray, key: str) -> Any:
    return sum((parts[i][key] for i in idx), start=0.0 * parts[0][key])


def top_of(cands: Scores) -> str | None:
    """The view's unique highest-scored candidate; None when the top score is shared."""
    if not cands:
        return None
    best = max(s for s, _ in cands.values())
    tops = [c for c, (s, _) in cands.items() if s == best]
    return tops[0] if len(tops) == 1 else None


def preference(sa: float, sb: float) -> int:
    return 0 if sa > sb else (1 if sb > sa else -1)


def earlier_wins(s_first: float, s_second: float) -> float:
    """1 when the earlier-shown candidate scores higher, 1/2 for a tie, 0 otherwise."""
    return 1.0 if s_first > s_second else (0.5 if s_first == s_second else 0.0)
