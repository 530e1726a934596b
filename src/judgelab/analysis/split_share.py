"""Signal fidelity as the policy improves: its two parts, and the judges' ranking at any share
of groups the tests split.

Signal fidelity (analysis/fidelity.py, docs/METRICS.md) is Σ c_t / Σ d_t over the tasks with
truth. Call S the tasks the tests split (a passing and a failing candidate; n_S of them) and U
the others (n_U). Its two parts:

- **alignment** A = Σ_S c_t / Σ_S e_t, with e_t the tests' push in t (mean of their squared
  advantages; 1 under the `std` convention): signal fidelity on the split tasks alone, how
  closely the judge's push follows the tests' where the tests have a direction;
- **noise** N = (Σ_U p_t / n_U) / (Σ_S e_t / n_S), with p_t the judge's push in t (mean of its
  squared advantages): how hard it pushes in a group the tests do not split, per group, in
  units of the tests' push in a group they split. Under `std` a group scored unevenly costs 1
  whatever the size of the differences (less its unscored candidates' share); under `centred`
  (and `batch`) the cost grows with the size of the differences.

A policy whose groups the tests split in a share s of its batches gets

    SF(s) = s·A / (s + (1 − s)·N),

which at the audit's own share s0 = n_S / (n_S + n_U) is the audit's signal fidelity exactly
(a unit test holds it). As the policy improves (or a task set gets harder) s moves, and with it
the order of two judges whose A and N differ: the crossing share of judges i and j is
D / (D − A_i + A_j), D = A_i·N_j − A_j·N_i, where it lies in (0, 1).

Each figure's CI is the percentile interval of the same figure over the analysis's task
resamples (`stats.resample_weights`, the paired matrix every truth figure uses), at the CI
level of `stats.CIRule`; none below `min_ci_groups` split tasks (alignment) or split and
unsplit tasks (noise, SF(s)). `n_split_groups` and `n_unsplit_groups` are the n.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from judgelab.advantage import Convention
from judgelab.analysis.fidelity import candidate_scores, signal_parts
from judgelab.analysis.stats import CIRule
from judgelab.analysis.truth import Truth

SHARES: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def fidelity_at(share: float | np.ndarray, alignment: Any, noise: Any) -> Any:
    """SF(s) = s·A / (s + (1 − s)·N) (module docstring); NaN where undefined."""
    s = np.asarray(share, dtype=float)
    a, n = np.asarray(alignment, dtype=float), np.asarray(noise, dtype=float)
    den = s + (1 - s) * n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, s * a / np.where(den > 0, den, 1.0), np.nan)


def crossing(a_i: float, n_i: float, a_j: float, n_j: float) -> float | None:
    """The split share in (0, 1) at which judges i and j have equal SF, or None."""
    d = a_i * n_j - a_j * n_i
    den = d - a_i + a_j
    if abs(den) < 1e-12:
        return None
    s = d / den
    return float(s) if 0 < s < 1 else None


def parts_of(sig: Any, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(alignment, noise) of one judge's signal parts (`fidelity.signal_parts`) on each row of
    task weights `w` (resamples × tasks)."""
    split_push = w @ sig.split_push
    with np.errstate(divide="ignore", invalid="ignore"):
        alignment = (w @ sig.fid_num) / split_push
        noise = ((w @ sig.unsplit_push) / (w @ sig.unsplit)) / (split_push / (w @ sig.split))
    return alignment, noise


def _interval(draws: np.ndarray, ok: bool, level: float) -> tuple[float | None, float | None]:
    finite = draws[np.isfinite(draws)]
    if not ok or finite.size < 2:
        return None, None
    tail = 100 * (1 - level) / 2
    return float(np.percentile(finite, tail)), float(np.percentile(finite, 100 - tail))


def judge_parts(
    cand: pl.DataFrame,
    truth: Truth,
    weights: np.ndarray,
    rule: CIRule,
    convention: Convention,
    expected: float,
) -> dict[str, Any]:
    """One judge's alignment, noise and SF at each of `SHARES` and at `expected`, with CIs."""
    sig = signal_parts(cand, truth, convention)
    (a,), (n,) = parts_of(sig, np.ones((1, len(truth.tasks))))
    n_split, n_unsplit = int(sig.split.sum()), int(sig.unsplit.sum())
    has_a = n_split >= rule.min_ci_groups and weights.shape[0] > 0
    has_both = has_a and n_unsplit >= rule.min_ci_groups
    a_b, n_b = parts_of(sig, weights) if has_a else (np.zeros(0), np.zeros(0))
    out: dict[str, Any] = {"alignment": float(a), "noise": float(n), "n_split_groups": n_split,
                           "n_unsplit_groups": n_unsplit}  # fmt: skip
    out["alignment_ci_low"], out["alignment_ci_high"] = _interval(a_b, has_a, rule.level)
    out["noise_ci_low"], out["noise_ci_high"] = _interval(n_b, has_both, rule.level)
    curve = []
    for s in (*SHARES, expected):
        row = {"share": s, "signal_fidelity": float(fidelity_at(s, a, n))}
        draws = fidelity_at(s, a_b, n_b) if has_both else np.zeros(0)
        row["ci_low"], row["ci_high"] = _interval(draws, has_both, rule.level)
        curve.append(row)
    out["curve"], out["at_expected"] = curve[:-1], curve[-1]
    return out


def first_by_share(judges: dict[str, dict[str, Any]]) -> list[str | None]:
    """The judge with the highest SF at each of `SHARES` (None where no judge has one)."""
    firsts: list[str | None] = []
    for i in range(len(SHARES)):
        values = {
            name: j["curve"][i]["signal_fidelity"]
            for name, j in judges.items()
            if np.isfinite(j["curve"][i]["signal_fidelity"])
        }
        firsts.append(max(sorted(values), key=lambda k: values[k]) if values else None)
    return firsts


def split_share(
    scores: pl.DataFrame,
    truth: Truth,
    judges: list[str],
    weights: np.ndarray,
    rule: CIRule,
    convention: Convention,
    expected: float | None,
) -> dict[str, Any]:
    """metrics.json's `split_share` block: every judge's parts, its SF across `SHARES` and at
    the expected share (`analysis.expected_split_share`; None: the audit's own), the judge
    first at each share and every crossing of two judges' curves."""
    sig = None
    parts: dict[str, dict[str, Any]] = {}
    for name in judges:
        cand = candidate_scores(scores, name)
        sig = sig or signal_parts(cand, truth, convention)
        parts[name] = cand
    n_split = int(sig.split.sum()) if sig is not None else 0
    n_unsplit = int(sig.unsplit.sum()) if sig is not None else 0
    if not (n_split and n_unsplit):
        return {"reason": "needs tasks the tests split and tasks they do not",
                "n_split_groups": n_split, "n_unsplit_groups": n_unsplit}  # fmt: skip
    own = n_split / (n_split + n_unsplit)
    share = own if expected is None else expected
    out_judges = {name: judge_parts(cand, truth, weights, rule, convention, share)
                  for name, cand in parts.items()}  # fmt: skip
    names = sorted(out_judges)
    crossings = [
        {"judges": [a, b], "share": s}
        for i, a in enumerate(names)
        for b in names[i + 1 :]
        if (s := crossing(out_judges[a]["alignment"], out_judges[a]["noise"],
                          out_judges[b]["alignment"], out_judges[b]["noise"])) is not None
    ]  # fmt: skip
    return {
        "convention": convention,
        "own_share": own,
        "expected_share": share,
        "expected_is_own": expected is None,
        "n_split_groups": n_split,
        "n_unsplit_groups": n_unsplit,
        "shares": list(SHARES),
        "judges": out_judges,
        "first_by_share": first_by_share(out_judges),
        "crossings": sorted(crossings, key=lambda c: c["share"]),
    }
