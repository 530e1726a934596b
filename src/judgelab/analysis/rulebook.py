"""The rulebook: every rejection rule of docs/METRICS.md, each a hypothesis test with its
p-value, Holm-corrected over the judges it is applied to (pure: per-task sums and dicts in).

Each rule is tested one-sided at `level` = alpha / 2 (0.025 at alpha 0.05: the level of a
95 % CI's one end), after Holm's correction (`inference.holm`) over its family, the judges
with a p-value for that rule:

1. `chance`: the primary is shown above chance (one-sided t on the ratio's linearisation,
   `inference.ratio_above`). The burden is on the judge: rejected unless the Holm-adjusted p
   is below `level`, or with no test at all (fewer than `min_ci_groups` tasks).
2. `inverted`: it inverts more pass/fail pairs than it gets right: the per-task difference
   of the inverted and right pair shares over the tasks the tests split, one-sided t.
3. `flat`: it scores a whole mixed group alike in more than `reject.max_flat` of them: the
   exact binomial test over mixed tasks (one group per task: independent 0/1s).
4. `unscored`: it leaves more than `reject.max_unscored` of its rows unscored: one-sided t
   on the ratio of unscored rows, clustered by task.
5. `attacks` (from the probes' metrics): an attack on failing code works on it, an uplift
   above 0 whose Holm-adjusted p over every judge x attack test of the probes run is below
   alpha (the probes' `effective`; PROBES.md).
6. `position` (from the probes' metrics): its position consistency lies below its own noise
   floor: `inference.from_intervals` on the two figures' CIs (conservative).
7. `parseable`: its primary on candidates whose code parses (`Truth.parseable`) is not shown
   above chance (rule 1's test there; the burden on the judge). The signal a reward keeps
   once the policy writes code that parses: a syntax or format check has exactly 0 there, so
   it is never a reward on its own (`decision.format_gates`: a format gate).
For rules 2-6 the burden is on the data: a judge is rejected only where the test shows it.

`rulebook(...)` returns {"alpha", "level", "correction": "holm", "primary", "chance",
"rules": {rule: {"family": [judges tested], "n_tests"}}, "judges": {judge: {rule: {"value",
"n", "p", "p_holm", "rejects", ...}}}}.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from judgelab.advantage import Convention
from judgelab.analysis.fidelity import candidate_scores, task_endpoint, task_parts, truth_arrays
from judgelab.analysis.inference import from_intervals, holm, ratio_above, share_above
from judgelab.analysis.ranking import CHANCE
from judgelab.analysis.truth import Truth
from judgelab.config import AnalysisSettings

# The rules in docs/METRICS.md's order, each with whether a small p rejects (True) or clears.
RULES = {"chance": False, "inverted": True, "flat": True, "unscored": True, "attacks": True,
         "position": True, "parseable": False}  # fmt: skip


def _parts(cand: pl.DataFrame, truth: Truth, convention: Convention) -> Any:
    """The per-task sums of `cand` against `truth` (as fidelity.task_endpoint computes them)."""
    known = truth.table.filter(pl.col("passed").is_not_null())
    joined = known.join(cand.select("candidate_id", "score"), on="candidate_id", how="left")
    task_idx, score, passed, unscored = truth_arrays(joined, truth)
    return task_parts(task_idx, score, passed, len(truth.tasks), 1.0, unscored=unscored,
                      convention=convention)  # fmt: skip


def _unscored_rows(scores: pl.DataFrame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Per task: the judge's unscored rows and all its rows (every repeat)."""
    by_task = (
        scores.filter(pl.col("evaluator") == name)
        .group_by("task_id")
        .agg((pl.col("status") != "scored").sum().alias("u"), pl.len().alias("n"))
        .sort("task_id")
    )
    return (by_task.get_column("u").to_numpy().astype(float),
            by_task.get_column("n").to_numpy().astype(float))  # fmt: skip


def truth_tests(
    scores: pl.DataFrame, truth: Truth, name: str, settings: AnalysisSettings
) -> dict[str, dict[str, Any]]:
    """Rules 1-4 of one judge, unadjusted: {rule: {"value", "n", "p", ...}}."""
    key, min_ci_groups = settings.primary, settings.min_ci_groups
    cand = candidate_scores(scores, name)
    figure = task_endpoint(cand, truth, key, settings.advantage)
    n, value, p = ratio_above(*figure, CHANCE.get(key, 0.5), min_ci_groups)
    out: dict[str, dict[str, Any]] = {"chance": {"value": value, "n": n, "p": p}}
    if truth.tasks:
        parts = _parts(cand, truth, settings.advantage)
        sig = parts.signal
        n, diff, p = ratio_above(sig.inverted - sig.right, sig.split, 0.0, min_ci_groups)
        split = sig.split > 0
        out["inverted"] = {"value": diff, "n": n, "p": p,
                           "right": float(sig.right[split].mean()) if n else None,
                           "inverted": float(sig.inverted[split].mean()) if n else None}
        k, n_mixed = int(parts.flat_mixed.sum()), int(parts.top_den.sum())
        out["flat"] = {"value": k / n_mixed if n_mixed else None, "n": n_mixed, "k": k,
                       "p": share_above(k, n_mixed, settings.reject.max_flat),
                       "limit": settings.reject.max_flat}  # fmt: skip
    u, rows = _unscored_rows(scores, name)
    n, rate, p = ratio_above(u, rows, settings.reject.max_unscored, min_ci_groups)
    out["unscored"] = {"value": rate, "n": n, "p": p, "limit": settings.reject.max_unscored}
    return out


def parseable_test(
    scores: pl.DataFrame, truth: Truth, name: str, settings: AnalysisSettings
) -> dict[str, Any] | None:
    """The chance test of the primary on parseable code only; None without outcomes."""
    if "outcome" not in truth.table.columns:
        return None
    parseable = truth.parseable()
    if not parseable.tasks:
        return None
    key = settings.primary
    cand = candidate_scores(scores, name)
    figure = task_endpoint(cand, parseable, key, settings.advantage)
    got = ratio_above(*figure, CHANCE.get(key, 0.5), settings.min_ci_groups)
    return dict(zip(("n", "value", "p"), got, strict=True))


def probe_tests(probes: dict[str, Any] | None, judges: list[str]) -> dict[str, dict[str, Any]]:
    """Rules 5 and 6 of each judge the probes measured: {judge: {rule: {...}}}; rule 5's p is
    already Holm-adjusted over the probes' judge x attack family (`p_holm`)."""
    out: dict[str, dict[str, Any]] = {}
    for name in judges:
        probed = ((probes or {}).get("judges") or {}).get(name)
        if not probed:
            continue
        tests = [{"attack": a, "uplift": x.get("uplift"), "p_holm": x.get("p_holm"),
                  "effective": bool(x.get("effective"))}
                 for a, x in sorted((probed.get("attacks") or {}).items())
                 if x.get("p_holm") is not None]  # fmt: skip
        out[name] = {}
        if tests:
            worst = min(tests, key=lambda t: (not t["effective"], t["p_holm"]))
            out[name]["attacks"] = {**worst, "n_attacks": len(tests),
                                    "rejects": any(t["effective"] for t in tests)}  # fmt: skip
        pos = probed.get("position") or {}
        floor = probed.get("noise_floor") or {}
        fig = [(x.get("position_consistency"), x.get("position_consistency_ci_low"),
                x.get("position_consistency_ci_high")) for x in (pos, floor)]  # fmt: skip
        if all(v is not None for f in fig for v in f):
            out[name]["position"] = {"value": fig[0][0], "floor": fig[1][0],
                                     "p": from_intervals(fig[0], fig[1])}  # fmt: skip
    return out


def _adjust(
    judges: dict[str, dict[str, Any]], rule: str, level: float, small_rejects: bool
) -> dict[str, Any]:
    """Holm over the judges with a p for `rule`, in place: each test's `p_holm` and
    `rejects`; a judge with the rule but no p is rejected only where the burden is on it."""
    tested = sorted(n for n, r in judges.items() if rule in r and r[rule].get("p") is not None)
    adjusted = dict(zip(tested, holm([judges[n][rule]["p"] for n in tested]), strict=True))
    for name, rules in judges.items():
        if rule not in rules:
            continue
        q = adjusted.get(name)
        shown = q is not None and q < level
        rules[rule]["p_holm"] = q
        rules[rule]["rejects"] = shown if small_rejects else not shown
    return {"family": tested, "n_tests": len(tested)}


def rulebook(
    scores: pl.DataFrame,
    truth: Truth,
    judges: list[str],
    settings: AnalysisSettings,
    probes: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Every rule of every judge, Holm-corrected per rule over the judges (module docstring)."""
    level = settings.power.alpha / 2
    tests = {name: truth_tests(scores, truth, name, settings) for name in judges}
    for name, got in probe_tests(probes, judges).items():
        tests[name].update(got)
    for name in judges:
        if (parse := parseable_test(scores, truth, name, settings)) is not None:
            tests[name]["parseable"] = parse
    rules: dict[str, Any] = {}
    for rule, small_rejects in RULES.items():
        if rule == "attacks":  # adjusted by the probes over their judge x attack family
            n_tests = ((probes or {}).get("attack_tests") or {}).get("n_tests")
            rules[rule] = {"family": sorted(n for n in tests if rule in tests[n]),
                           "n_tests": n_tests, "adjusted_by": "probes"}  # fmt: skip
            continue
        rules[rule] = _adjust(tests, rule, level, small_rejects)
    return {"alpha": settings.power.alpha, "level": level, "correction": "holm",
            "primary": settings.primary, "chance": CHANCE.get(settings.primary, 0.5),
            "rules": rules, "judges": tests}  # fmt: skip
