"""Power: how many task groups an audit needs before it can rank two judges by pairwise accuracy.

Contract (pure numpy over the truth module's per-task sums; nothing here reads files):
- For a judge, task t with both passing and failing candidates (a mixed task) gives pair
  credit c_t and pair count m_t; pairwise accuracy is the ratio R = sum c / sum m. Two judges A
  and B are compared on the mixed tasks they share (paired: the same tasks for both).
- Variance from the data: R's first-order (delta-method) expansion over tasks is
  R_hat - R ~ mean_t e_t with e_t = (c_t - R m_t) / mean(m), the variance a cluster bootstrap
  estimates. For the difference, u_t = e_t(A) - e_t(B) and Var(R_A - R_B) ~ s_u^2 / n, s_u the
  sample SD (ddof 1) of u over the n shared tasks. With the same number of pairs in every task,
  u_t is the per-task difference in pairwise accuracy minus its mean.
- Tasks needed to detect a margin d at two-sided level alpha with power 1 - beta (normal
  approximation, z from `statistics.NormalDist`):
    paired (both judges on the same tasks):   n = ceil(((z_{1-alpha/2} + z_{1-beta}) s_u / d)^2)
    independent (each judge on its own tasks): n = ceil((z_{1-alpha/2} + z_{1-beta})^2
                                                       (s_A^2 + s_B^2) / d^2) tasks per judge,
  s_J the SD of e_t(J). Null, with a reason, from fewer than 2 shared mixed tasks or when the
  observed SD is 0 (a variance cannot be estimated from no variation).
- `pairs[a][b]` (a < b by name) holds each pair's figures. The observed difference R_A - R_B
  has a paired cluster-bootstrap CI (the analysis' resample matrix, the minimum-clusters rule
  of `stats`); `separated` is true only when that CI exists and excludes 0. `too_small` says
  plainly that the audit cannot rank the pair: no CI, a CI that includes 0, or fewer shared
  tasks than needed for the margin.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.stats import MIN_CI_GROUPS, percentile_ci
from judgelab.analysis.truth import Truth, candidate_scores, task_pair_credit
from judgelab.config import PowerSettings

__all__ = ["groups_needed", "linearised", "power_analysis", "power_html", "power_markdown"]


def _z_sum(alpha: float, power: float) -> float:
    std = NormalDist()
    return std.inv_cdf(1.0 - alpha / 2.0) + std.inv_cdf(power)


def groups_needed(
    sd: float, margin: float, alpha: float = 0.05, power: float = 0.8, sd_other: float | None = None
) -> int:
    """Tasks needed to detect `margin` (normal approximation; module docstring). `sd` alone:
    paired, the SD of the per-task difference. With `sd_other`: independent, per judge."""
    var = sd**2 if sd_other is None else sd**2 + sd_other**2
    return math.ceil(_z_sum(alpha, power) ** 2 * var / margin**2)


def linearised(credit: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Each task's first-order contribution e_t to the ratio credit.sum() / pairs.sum()."""
    ratio = credit.sum() / pairs.sum()
    return (credit - ratio * pairs) / pairs.mean()


def _ratio_draws(w: np.ndarray, credit: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    den = w @ pairs
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, (w @ credit) / np.where(den > 0, den, 1.0), np.nan)


def compare(
    a: tuple[np.ndarray, np.ndarray],
    b: tuple[np.ndarray, np.ndarray],
    settings: PowerSettings,
    weights: np.ndarray | None,
    min_groups: int = MIN_CI_GROUPS,
) -> dict[str, Any]:
    """Two judges' (credit, pairs) per task (same task order): difference, CI, power."""
    (ca, ma), (cb, mb) = a, b
    shared = (ma > 0) & (mb > 0)
    n = int(shared.sum())
    out: dict[str, Any] = {"n_groups": n, "difference": None, "sd_difference": None,
                           "groups_needed_paired": None, "groups_needed_independent": None,
                           "separated": False, "reason": None}  # fmt: skip
    if n == 0:
        out["reason"] = "no task is mixed (passing and failing candidates) for both judges"
        out.update(percentile_ci(None, 0, min_groups).fields("difference"))
        out["too_small"] = True
        return out
    ca, ma, cb, mb = (np.where(shared, x, 0.0) for x in (ca, ma, cb, mb))
    out["difference"] = float(ca.sum() / ma.sum() - cb.sum() / mb.sum())
    draws = None
    if weights is not None and weights.shape[0] and n >= min_groups:
        draws = _ratio_draws(weights, ca, ma) - _ratio_draws(weights, cb, mb)
    ci = percentile_ci(draws, n, min_groups)
    out.update(ci.fields("difference"))
    out["separated"] = ci.excludes(0.0)
    if n < 2:
        out["reason"] = f"n = {n} shared mixed task: a variance needs at least 2"
    else:
        ea = linearised(ca[shared], ma[shared])
        eb = linearised(cb[shared], mb[shared])
        sd, sd_a, sd_b = (float(np.std(x, ddof=1)) for x in (ea - eb, ea, eb))
        out["sd_difference"] = sd
        if sd == 0:
            out["reason"] = f"no variation between the {n} shared tasks: no variance estimate"
        else:
            m, al, pw = settings.margin, settings.alpha, settings.power
            out["groups_needed_paired"] = groups_needed(sd, m, al, pw)
            out["groups_needed_independent"] = groups_needed(sd_a, m, al, pw, sd_other=sd_b)
    needed = out["groups_needed_paired"]
    out["too_small"] = not out["separated"] or needed is None or n < needed
    return out


def power_analysis(
    scores: pl.DataFrame,
    truth: Truth,
    evaluators: dict[str, dict[str, Any]],
    settings: PowerSettings,
    weights: np.ndarray | None,
    min_groups: int = MIN_CI_GROUPS,
) -> dict[str, Any]:
    """Every pair of judges (evaluators other than execution truth): the module's figures."""
    judges = sorted(n for n, ev in evaluators.items() if ev.get("protocol") != "execution")
    per_task: dict[str, tuple[np.ndarray, np.ndarray]] = {
        name: task_pair_credit(candidate_scores(scores, name), truth) for name in judges
    }
    pairs: dict[str, dict[str, Any]] = {}
    for a, b in itertools.combinations(judges, 2):
        pairs.setdefault(a, {})[b] = compare(per_task[a], per_task[b], settings, weights,
                                             min_groups)  # fmt: skip
    flat = list(_pairs(pairs))
    needed = [p["groups_needed_paired"] for _, _, p in flat if p["groups_needed_paired"]]
    return {
        "margin": settings.margin,
        "alpha": settings.alpha,
        "power": settings.power,
        "min_ci_groups": min_groups,
        "n_judges": len(judges),
        "n_tasks": len(truth.tasks),
        "pairs": pairs,
        "max_groups_needed": max(needed) if needed else None,
        "can_rank": bool(flat) and not any(p["too_small"] for _, _, p in flat),
    }


def _pairs(pairs: dict[str, dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(a, b, figures) for every compared pair, sorted."""
    return [(a, b, pairs[a][b]) for a in sorted(pairs) for b in sorted(pairs[a])]


# ----------------------------------------------------------------------------- report


def summary(power: dict[str, Any]) -> str:
    """One plain sentence: can this audit rank its judges, and what would it take."""
    pairs = [p for _, _, p in _pairs(power.get("pairs") or {})]
    if not pairs:
        return "Fewer than two judges: there is nothing to rank."
    if power.get("can_rank"):
        return (
            f"Every pair of the {power['n_judges']} judges is separated by a CI that excludes "
            "0, on enough tasks for the margin."
        )
    unsep = sum(1 for p in pairs if not p["separated"])
    n = max(p["n_groups"] for p in pairs)
    need = power.get("max_groups_needed")
    need_txt = (
        f"about {need} tasks with passing and failing candidates would be needed to separate "
        f"every pair by {power['margin']:g} in pairwise accuracy (alpha {power['alpha']:g}, "
        f"power {power['power']:g}, from the variance observed here)"
        if need
        else "the variance between tasks cannot be estimated yet, so not even the number "
        "of tasks needed can be said"
    )
    return (
        f"This audit is too small to rank its judges: {unsep} of {len(pairs)} pairs are not "
        f"separated by a CI that excludes 0, on at most {n} shared mixed "
        f"{'task' if n == 1 else 'tasks'}; {need_txt}."
    )


Formatter = Callable[[dict[str, Any], str], str]  # report.fmt_ci


def _cell(x: Any) -> str:
    return "n/a" if x is None else str(x)


HEADER = ("judges", "difference", "tasks", "tasks needed (paired)",
          "tasks needed per judge (independent)", "verdict")  # fmt: skip


def rows(power: dict[str, Any], fmt: Formatter) -> list[list[str]]:
    out = []
    for a, b, p in _pairs(power.get("pairs") or {}):
        if p["separated"]:
            better = a if p["difference"] > 0 else b
            verdict = f"{better} has the higher pairwise accuracy (CI excludes 0)"
        else:
            verdict = "not separated" + (f": {p['reason']}" if p.get("reason") else "")
        out.append(
            [f"{a} − {b}", fmt(p, "difference"), str(p["n_groups"]),
             _cell(p["groups_needed_paired"]), _cell(p["groups_needed_independent"]), verdict]
        )  # fmt: skip
    return out


def power_markdown(power: dict[str, Any], fmt: Formatter) -> list[str]:
    if not power:
        return []
    out = ["## Power: can this audit rank its judges?", "", summary(power), ""]
    if power.get("pairs"):
        out += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |"
                for r in rows(power, fmt)]  # fmt: skip
        out.append("")
    return out


def power_html(power: dict[str, Any], fmt: Formatter, escape: Callable[[Any], str]) -> list[str]:
    if not power:
        return []
    h = ["<h2>Power: can this audit rank its judges?</h2>", f"<p>{escape(summary(power))}</p>"]
    if power.get("pairs"):
        h.append('<table id="power"><thead><tr>')
        h += [f"<th>{escape(c)}</th>" for c in HEADER]
        h.append("</tr></thead><tbody>")
        for r in rows(power, fmt):
            h.append("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>")
        h.append("</tbody></table>")
    return h
