"""The crossed (two-way) bootstrap of the first-order study's effect: the training tasks and
the bank tasks are both samples, so each resample draws both.

Contract:
- The effect is a ratio of per-(training task t, bank task b) terms: N_tb = Σ_i A_i s_ib over
  t's samples (s_ib = ⟨∇ℓ_i, ∇F_b⟩, `training.first_order`) and D_t = Σ_i |A_i|, with
  R = (Σ_t Σ_b N_tb / T) / Σ_t D_t for T bank tasks (= η⁻¹ × the effect).
- A resample draws training-task counts w (`stats.resample_weights` with the analysis's seed:
  the very draws of the whole-bank bootstrap, so the audit figures' draws stay paired with
  it) and, independently, bank-task counts v (`bank_resample_weights`: the same rule on
  another stream), and takes R* = (Σ_t w_t Σ_b v_b N_tb / Σ_b v_b) / Σ_t w_t D_t: each
  training task's numerator is its mean over the drawn bank, and the ratio is over the
  drawn tasks (Owen 2007's pigeonhole bootstrap for a crossed design; its variance counts
  the task × bank interaction twice, so it errs wide, never narrow).
- `crossed_t_ci` studentizes R* as `stats.bootstrap_t_ci` does, with a two-way SE:
  SE² = SE_tasks² + SE_bank², SE_tasks the ratio's delta-method SE over the training tasks
  (each task's numerator at the resample's bank draw) and SE_bank² = Σ_b v_b (R_b − R)² /
  (T (T − 1)), R_b = Σ_t w_t N_tb / Σ_t w_t D_t the ratio on bank task b alone (R is their
  v-weighted mean). With one bank task v is always 1, SE_bank = 0 and every figure is the
  whole-bank bootstrap's (tested).
"""

from __future__ import annotations

import numpy as np

from judgelab.analysis.stats import (
    CI_LEVEL,
    NO_BOOTSTRAP,
    Interval,
    flat_se,
    no_interval,
    resample_weights,
    studentized,
    too_few_groups,
)

BANK_STREAM = 1_000_003  # the bank draws' seed offset: a stream apart from the tasks'


def bank_resample_weights(n_banks: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n_banks) counts of each bank task in each resample, independent of the
    training tasks' draws under the same analysis seed."""
    return resample_weights(n_banks, n_boot, seed + BANK_STREAM)


def crossed_ratios(num: np.ndarray, den: np.ndarray, w: np.ndarray, v: np.ndarray) -> np.ndarray:
    """R* per resample (module docstring): `num` (tasks, banks), `den` (tasks,), `w`
    (resamples, tasks), `v` (resamples, banks); NaN where the drawn tasks have no D."""
    per_task = (w @ num) * v  # (resamples, banks): Σ_t w_t N_tb, weighted by v_b
    with np.errstate(divide="ignore", invalid="ignore"):
        return per_task.sum(axis=1) / v.sum(axis=1) / (w @ den)


def crossed_ratio_se(
    num: np.ndarray, den: np.ndarray, w: np.ndarray, v: np.ndarray, used: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per resample (w, v): R* and its two-way SE (module docstring)."""
    n_banks = v.sum(axis=1)
    n_w = w @ used.astype(float)
    wd = w @ den
    with np.errstate(divide="ignore", invalid="ignore"):
        task_num = (v @ num.T) / n_banks[:, None]  # (resamples, tasks): mean over drawn banks
        r = (w * task_num).sum(axis=1) / wd
        resid = task_num - r[:, None] * den[None, :]
        mean_den = wd / n_w
        tasks2 = np.sum(w * resid * resid, axis=1) / (mean_den**2 * n_w * (n_w - 1))
        own = (w @ num) / wd[:, None]  # (resamples, banks): each bank task's ratio
        spread = np.sum(v * (own - r[:, None]) ** 2, axis=1)
        bank2 = np.where(n_banks > 1, spread / (n_banks * (n_banks - 1)), 0.0)
    return r, np.sqrt(tasks2 + bank2)


def crossed_t_ci(
    num: np.ndarray,
    den: np.ndarray,
    w: np.ndarray | None,
    v: np.ndarray | None,
    min_ci_groups: int,
    level: float = CI_LEVEL,
) -> Interval:
    """The studentized crossed bootstrap's CI of R (module docstring) over the training tasks
    with D > 0 (at least `min_ci_groups` of them) and every bank task."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    used = den > 0
    n = int(used.sum())
    why = too_few_groups(n, min_ci_groups)
    if why:
        return no_interval(why, n)
    if w is None or v is None or not w.shape[0]:
        return no_interval(NO_BOOTSTRAP, n)
    ones = (np.ones((1, num.shape[0])), np.ones((1, num.shape[1])))
    r, se = (float(x[0]) for x in crossed_ratio_se(num, den, *ones, used))
    if flat_se(se, r):
        return no_interval(
            f"all {n} groups and {num.shape[1]} bank tasks give the same value: no spread "
            "for a CI", n,
        )  # fmt: skip
    r_b, se_b = crossed_ratio_se(num, den, w, v, used)
    return studentized(r, se, r_b, se_b, n, level)
