"""The noise floor of a judge (the table, views and tops: `probe_views`), clustered by task.

`noise_floor` (repeats of ``perm:0`` at the repeat temperature): the same
figures computed between every two calls of the identity view, i.e. what a judge with no
position or perturbation bias but this much sampling noise would show. `position_consistency`
(same preference for a pair in both calls), `top_choice_agreement`, `mean_abs_delta`,
`robustness_rate` (share of candidates whose score moved by at most `tolerance` between two
calls), `pair_instability` (mean |p_r - p_s| over pairs, p = 1, 1/2, 0 for earlier-shown
wins, tie, later-shown wins: the largest |preference_fairness| noise alone can produce) and
`stability` (Shi et al.'s repetition stability: per group, the share of calls whose top is the
group's most frequent top, a call without a top never counting; mean over groups).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Collection
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.probe_views import (
    PERM,
    Scores,
    add_figure,
    by_task,
    earlier_wins,
    explain,
    preference,
    ratio_or_none,
    scored_rows,
    top_of,
)
from judgelab.analysis.stats import CIRule

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
    for r in scored_rows(shown).iter_rows(named=True):
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
    same = preference(a[x][0], a[y][0]) == preference(b[x][0], b[y][0])
    p["consistent"] += float(same)
    flat = same and preference(a[x][0], a[y][0]) == -1  # tied in both calls
    p["ordered_pairs"] += float(not flat)
    p["ordered_consistent"] += float(same and not flat)
    p["instability"] += abs(
        earlier_wins(a[first][0], a[second][0]) - earlier_wins(b[first][0], b[second][0])
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
        return lambda idx: ratio_or_none(sum(parts[i][num] for i in idx),
                                  sum(parts[i][den] for i in idx))  # fmt: skip

    add_figure(out, "position_consistency", n, r("ordered_consistent", "ordered_pairs"), rule)
    add_figure(out, "position_consistency_with_flat", n, r("consistent", "pairs"), rule)
    add_figure(out, "pair_instability", n, r("instability", "pairs"), rule)
    add_figure(out, "top_choice_agreement", n, r("top_same", "top_pairs"), rule)
    # mean over groups with a full call
    add_figure(out, "stability", n, r("stability_sum", "stability_n"), rule)
    add_figure(out, "mean_abs_delta", n, r("delta_sum", "delta_n"), rule)
    add_figure(out, "robustness_rate", n, r("robust", "robust_n"), rule)
    explain(out, {
        "position_consistency": "no candidate pair was scored in two calls",
        "pair_instability": "no candidate pair was scored in two calls",
        "top_choice_agreement": "no two calls of a group scored every member",
        "stability": "no call of a group scored every member",
        "mean_abs_delta": "no candidate was scored in two calls",
        "robustness_rate": "no candidate was scored in two calls",
    })  # fmt: skip
