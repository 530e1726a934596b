"""Paired comparisons of judges on the primary endpoint, corrected for multiplicity, and power:
how many task groups an audit needs before it can rank two judges.

Contract (pure numpy over the truth module's per-task sums; nothing here reads files):
- The endpoint is `analysis.primary` (fidelity.PRIMARY). For a judge, task t gives a numerator
  c_t and a denominator m_t (`fidelity.task_endpoint`): pair credit and pair count for the
  pairwise accuracies, the task's value and 1 for the per-mixed-task figures, the
  correlation and 1 or the judge's push for signal fidelity; the figure is the ratio
  R = sum c / sum m. Two judges A and B are compared on the tasks both have a denominator in
  (paired: the same tasks for both), or, for signal fidelity (fidelity.NOISE_COUNTED), either:
  a task the tests do not split counts for the judge that pushes there, and the other's 0
  there is its figure's, not a missing value. `units` names those tasks in the report.
- Variance: R's first-order (delta-method) expansion over tasks is R_hat - R ~ mean_t e_t with
  e_t = (c_t - R m_t) / mean(m), the variance a cluster bootstrap estimates. For the
  difference, u_t = e_t(A) - e_t(B) and SE = s_u / sqrt(n), s_u the sample SD (ddof 1) of u
  over the n shared tasks (with one pair count per task, u_t is the per-task difference
  minus its mean).
- Each pair's difference D = R_A - R_B (`paired_t`, which the attack tests of
  `analysis.attacks` use too) gets a t-based cluster interval D ± t_{n-1} SE and a
  two-sided p-value from t = D / SE with n - 1 degrees of freedom (the interval excludes 0
  exactly when p < 0.05), both only from at least `rule.min_ci_groups` shared tasks. With SE = 0 the
  tasks all show the same difference: p = 0 when it is not 0, 1 when it is.
- Multiplicity: Holm's step-down correction (`inference.holm`) over every pair with a
  p-value (m of them). `separated` is true only when the Holm-adjusted p is below `alpha`:
  the only "A above B" the ranking reads.
- Equivalence at the margin (`analysis.margin`, the smallest difference worth acting on):
  Schuirmann's TOST on the same D and SE (`inference.tost`), Holm-adjusted over the same m
  pairs; `equivalent` when that adjusted p is below `alpha`. A pair neither separated nor
  equivalent is undecided; `tasks_to_decide` is then the shared tasks that reach one of the
  two verdicts with power `power` at the margin whatever the truth (a true gap of the
  margin found, or a true gap of 0 called equivalent), each test at alpha / m. Never a
  figure at the observed gap: post-hoc power is a restatement of the p-value.
- Power, per pair from that pair's own s_u, only from at least `rule.min_ci_groups` shared tasks
  (below that: "cannot estimate yet", with the number of mixed groups it needs): tasks
  needed to detect a difference d at two-sided level alpha with power 1 - beta,
    n = ceil(((t_{1-alpha/2, n-1} + t_{1-beta, n-1}) s_u / d)^2),
  solved by iteration from the normal approximation (z from `statistics.NormalDist`); the
  planted-judge self-test (docs/SELFTEST.md) found the normal one short of its power,
  for d = the margin (`groups_needed_margin`); `groups_needed_independent` the same with
  each judge on its own tasks, (s_A^2 + s_B^2) in place of s_u^2, tasks per judge. Never
  below `rule.min_ci_groups` (fewer shared tasks give no comparison). Null, with
  `power_reason`, when the SD is 0. No figure here is a maximum over pairs.
- `pairs[a][b]` (a < b by name) holds each pair's figures; `too_small` says plainly that the
  audit cannot rank the pair: not separated, or fewer shared tasks than the margin needs.
"""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl
from scipy import stats as scipy_stats

from judgelab.advantage import Convention
from judgelab.analysis.fidelity import NOISE_COUNTED, candidate_scores, task_endpoint
from judgelab.analysis.inference import holm, tasks_to_decide, tost
from judgelab.analysis.stats import CIRule, Interval, no_interval, too_few_groups
from judgelab.analysis.truth import Truth
from judgelab.config import PowerSettings

__all__ = ["compare", "groups_needed", "holm", "linearised", "paired_t", "power_analysis",
           "verdicts"]  # fmt: skip

LABELS = {
    "signal_fidelity": "signal fidelity",
    "pairwise_accuracy_strict": "strict pairwise accuracy",
    "pairwise_accuracy": "pairwise accuracy (ties half)",
    "advantage_fidelity": "advantage fidelity",
    "top1_over_chance": "top-1 accuracy over chance",
}


def _z_sum(alpha: float, power: float) -> float:
    std = NormalDist()
    return std.inv_cdf(1.0 - alpha / 2.0) + std.inv_cdf(power)


def groups_needed(
    sd: float, margin: float, alpha: float = 0.05, power: float = 0.8, sd_other: float | None = None
) -> int:
    """Tasks needed to detect `margin` (module docstring): the normal approximation, then t
    quantiles with n - 1 degrees of freedom until n settles (the paired t-test the comparison
    runs; the normal one asks for too few tasks when n is small). `sd` alone: paired, the SD
    of the per-task difference. With `sd_other`: independent, per judge."""
    var = sd**2 if sd_other is None else sd**2 + sd_other**2
    n = max(2, math.ceil(_z_sum(alpha, power) ** 2 * var / margin**2))
    for _ in range(100):
        df = n - 1
        t_sum = float(scipy_stats.t.ppf(1 - alpha / 2, df) + scipy_stats.t.ppf(power, df))
        new = max(2, math.ceil(t_sum**2 * var / margin**2))
        if new == n:
            break
        n = new
    return n


def linearised(credit: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Each task's first-order contribution e_t to the ratio credit.sum() / pairs.sum()."""
    ratio = credit.sum() / pairs.sum()
    return (credit - ratio * pairs) / pairs.mean()


def units(primary: str) -> str:
    """What the compared tasks of `primary` are, in words."""
    if primary in NOISE_COUNTED:
        return "tasks the tests split or where either judge's scores differ"
    return "mixed tasks (passing and failing candidates) judged by both"


def cannot_estimate(n: int, min_ci_groups: int) -> str:
    """The power figure's reason below the minimum clusters: what it has and what it needs,
    so that a missing figure tells the reader how many more tasks to judge."""
    return (
        f"cannot estimate yet: n = {n} shared {'task' if n == 1 else 'tasks'}; the "
        f"variance needs at least {min_ci_groups}"
    )


def shared_clusters(ma: np.ndarray, mb: np.ndarray, either: bool = False) -> np.ndarray:
    """The clusters two ratios are compared on: where both denominators are positive, or,
    `either`, one of them (a figure whose denominator counts a judge's signal where the tests
    give none: the other's 0 there is its figure's, not a missing value)."""
    return ((ma > 0) | (mb > 0)) if either else ((ma > 0) & (mb > 0))


def paired_t(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    rule: CIRule,
    either: bool = False,
) -> tuple[int, float | None, float | None, Interval, float | None]:
    """Two ratios' (numerator, denominator) per cluster, same order, compared on their
    `shared_clusters`: (n of them, D = R_a - R_b, the SD of the per-cluster
    linearised difference, D's t-based interval at `rule.level` and the two-sided p of
    t = D / SE with n - 1 df; module docstring). The interval and p only from
    `rule.min_ci_groups` clusters; SE = 0 gives p = 0 when D is not 0, 1 when it is."""
    (ca, ma), (cb, mb) = a, b
    shared = shared_clusters(ma, mb, either)
    n = int(shared.sum())
    if n == 0:
        return 0, None, None, no_interval("no cluster has both figures", 0), None
    ca, ma, cb, mb = (x[shared] for x in (ca, ma, cb, mb))
    if not (ma.sum() > 0 and mb.sum() > 0):  # (either) one has no denominator anywhere
        return n, None, None, no_interval("one figure is undefined on these clusters", n), None
    diff = float(ca.sum() / ma.sum() - cb.sum() / mb.sum())
    sd = float(np.std(linearised(ca, ma) - linearised(cb, mb), ddof=1)) if n >= 2 else None
    why = too_few_groups(n, rule.min_ci_groups)
    if why or sd is None:
        return n, diff, sd, no_interval(why or "", n), None
    se = sd / math.sqrt(n)
    if se > 0:
        t_crit = float(scipy_stats.t.ppf(0.5 + rule.level / 2, n - 1))
        ci = Interval(diff - t_crit * se, diff + t_crit * se, None, n)
        return n, diff, sd, ci, float(2 * scipy_stats.t.sf(abs(diff) / se, n - 1))
    return n, diff, sd, Interval(diff, diff, None, n), 0.0 if abs(diff) > 1e-12 else 1.0


def compare(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    settings: PowerSettings,
    rule: CIRule,
    either: bool = False,
    margin: float = 0.05,
) -> dict[str, Any]:
    """Two judges' (numerator, denominator) per task (same task order): the difference, its
    t-based interval at `rule.level` and p-value (unadjusted, `paired_t`), the TOST p that it
    lies within `margin` (unadjusted), and the power figures at `margin` (module docstring),
    from `rule.min_ci_groups` shared tasks or more, on their `shared_clusters` (`either`)."""
    min_ci_groups = rule.min_ci_groups
    n, diff, sd, ci, p = paired_t(a, b, rule, either)
    out: dict[str, Any] = {"n_groups": n, "difference": diff, "sd_difference": sd,
                           "p_value": p, "p_holm": None, "separated": False,
                           "p_equivalence": None, "p_equivalence_holm": None,
                           "equivalent": False, "groups_needed_margin": None,
                           "groups_needed_independent": None, "tasks_to_decide": None,
                           "power_reason": None, "reason": None}  # fmt: skip
    if n == 0 or diff is None:
        out["reason"] = (
            "the two judges share no task with a figure" if n == 0
            else "one judge has no figure on these tasks: the tests split none of them"
        )  # fmt: skip
        out["power_reason"] = cannot_estimate(0, min_ci_groups)
        out.update(no_interval(out["reason"], n).fields("difference"))
        out["too_small"] = True
        return out
    out.update(ci.fields("difference"))
    if too_few_groups(n, min_ci_groups):
        out["power_reason"] = cannot_estimate(n, min_ci_groups)
        out["too_small"] = True
        return out
    assert sd is not None  # n >= min_ci_groups >= 2
    (ca, ma), (cb, mb) = a, b
    shared = shared_clusters(ma, mb, either)
    sd_a, sd_b = (float(np.std(linearised(c[shared], m[shared]), ddof=1))
                  for c, m in ((ca, ma), (cb, mb)))  # fmt: skip
    m, al, pw = margin, settings.alpha, settings.power
    out["p_equivalence"] = tost(diff, sd / math.sqrt(n), n, m)
    if sd == 0:
        out["power_reason"] = f"no variation between the {n} shared tasks: no variance estimate"
    else:
        # never below the minimum: fewer shared tasks give no comparison at all
        out["groups_needed_margin"] = max(groups_needed(sd, m, al, pw), min_ci_groups)
        out["groups_needed_independent"] = max(
            groups_needed(sd_a, m, al, pw, sd_other=sd_b), min_ci_groups
        )
    return out


def power_analysis(
    scores: pl.DataFrame,
    truth: Truth,
    evaluators: dict[str, dict[str, Any]],
    settings: PowerSettings,
    rule: CIRule,
    primary: str,
    convention: Convention = "std",
    margin: float = 0.05,
) -> dict[str, Any]:
    """Every pair of judges (evaluators other than execution truth) on `primary` (its
    signal figures under the advantage `convention`): the module's figures, Holm-corrected
    over all pairs, with the equivalence verdicts at `margin` (`analysis.margin`)."""
    judges = sorted(n for n, ev in evaluators.items() if ev.get("protocol") != "execution")
    per_task = {
        name: task_endpoint(candidate_scores(scores, name), truth, primary, convention)
        for name in judges
    }
    pairs: dict[str, dict[str, Any]] = {}
    for a, b in itertools.combinations(judges, 2):
        pairs.setdefault(a, {})[b] = compare(
            per_task[a], per_task[b], settings, rule, primary in NOISE_COUNTED, margin
        )
    tested = [p for _, _, p in sorted_pairs(pairs) if p["p_value"] is not None]
    verdicts(tested, settings, margin)
    for _, _, p in sorted_pairs(pairs):
        need = p["groups_needed_margin"]
        p["too_small"] = not p["separated"] or need is None or p["n_groups"] < need
    flat = list(sorted_pairs(pairs))
    return {
        "endpoint": primary,
        "correction": "holm",
        "n_comparisons": len(tested),
        "margin": margin,
        "alpha": settings.alpha,
        "power": settings.power,
        "min_ci_groups": rule.min_ci_groups,
        "n_judges": len(judges),
        "n_tasks": len(truth.tasks),
        "units": units(primary),
        "pairs": pairs,
        "can_rank": bool(flat) and not any(p["too_small"] for _, _, p in flat),
    }


def verdicts(tested: list[dict[str, Any]], settings: PowerSettings, margin: float) -> None:
    """Each tested pair's verdicts, in place: `separated` (Holm-adjusted two-sided p below
    alpha over the m tested pairs), `equivalent` (Holm-adjusted TOST p below alpha over the
    same m pairs) and, for a pair with neither, `tasks_to_decide`: the shared tasks that
    reach one verdict with `settings.power` at `margin` whatever the truth, each test at
    alpha / m (Holm's strictest step; inference.tasks_to_decide)."""
    m = len(tested)
    for p, adjusted in zip(tested, holm([p["p_value"] for p in tested]), strict=True):
        p["p_holm"] = adjusted
        p["separated"] = adjusted < settings.alpha
    eq = [p for p in tested if p["p_equivalence"] is not None]
    for p, adjusted in zip(eq, holm([p["p_equivalence"] for p in eq]), strict=True):
        p["p_equivalence_holm"] = adjusted
        p["equivalent"] = adjusted < settings.alpha
    for p in tested:
        if not (p["separated"] or p["equivalent"]) and p["sd_difference"]:
            need = tasks_to_decide(p["sd_difference"], margin, settings.alpha / m, settings.power)
            p["tasks_to_decide"] = need["decide"]


def sorted_pairs(pairs: dict[str, dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(a, b, figures) for every compared pair, sorted."""
    return [(a, b, pairs[a][b]) for a in sorted(pairs) for b in sorted(pairs[a])]


def pair(power: dict[str, Any], a: str, b: str) -> dict[str, Any] | None:
    """The figures of the pair {a, b}, oriented so that `difference` is a's minus b's."""
    x, y = sorted((a, b))
    p = ((power.get("pairs") or {}).get(x) or {}).get(y)
    if p is None or x == a:
        return p
    flipped = dict(p)
    for key in ("difference", "difference_ci_low", "difference_ci_high"):
        flipped[key] = None if p.get(key) is None else -p[key]
    flipped["difference_ci_low"], flipped["difference_ci_high"] = (
        flipped["difference_ci_high"], flipped["difference_ci_low"])  # fmt: skip
    return flipped
