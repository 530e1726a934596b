"""Self-preference, a judge's row of the policy x judge matrix and its self and family gaps
(the table: `probe_views`).

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

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.intervals import ratio_with_ci
from judgelab.analysis.probe_views import PERM, explain, scored_rows
from judgelab.analysis.stats import NO_BOOTSTRAP, CIRule, no_interval, t_ci


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
    sel = scored_rows(rows).filter(
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
    explain(out, {
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
