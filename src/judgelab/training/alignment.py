"""Within-group alignment: where GRPO's push goes, measured against the tests, and an alarm.

GRPO learns only from differences inside a group: candidate i of a group is pushed up or down
in proportion to its advantage A_i = (r_i - mean r) / std r (`judgelab.advantage`, ART's
definition; 0 in a flat group). Whether a judge teaches the policy to pass the tests is therefore a
within-group question, and mean rewards across epochs cannot answer it (task difficulty and
sampling noise mix in). Per epoch, over the trained groups (those whose judge rewards have
spread, the ones GRPO steps on) and the candidates the tests gave a verdict:

- alignment = 2 * sum_i A_i * passed_i / sum_i |A_i|, summed over every trained group. As
  sum_i A_i = 0 in a group, it is +1 when all of the upward push goes to passing code and all
  of the downward push to failing code, -1 when the reverse, 0 when the push is blind to the
  tests (or every candidate of the group passed, or every one failed). Twice the share in the
  issue's definition, so that it spans [-1, 1]. Its CI: a percentile cluster bootstrap over
  groups (the ratio re-formed in each resample), only from `min_ci_groups` groups or more.
- rank correlation: Spearman's rho of reward and test verdict inside each group with spread in
  both, averaged over those groups (its own n).
- p (one-sided): a within-group permutation test of "the judge's advantages are blind to the
  tests" against "they favour failing code": the advantages are permuted among a group's tested
  candidates, independently per group (Monte Carlo, `PERMUTATIONS` draws, a fixed seed).

**The alarm** is sequential, over the whole run: the e-detector of `judgelab.training.alarm`.
Each trained group g gives, for each lambda in `LAMBDAS`, the e-value exp(lambda * t_g) /
E_perm[exp(lambda * t_g)], with t_g = -sum A_i passed_i / sum |A_i| (the group's anti-alignment)
and the expectation over the group's permutations (exact up to `EXACT_MAX` tested candidates,
Monte Carlo beyond). Under the null (the judge's advantages are exchangeable with respect to the
tests: a blind judge) each has expectation 1 given the past. The training history feeds the
detector one observation per epoch (the product of the epoch's groups' e-values, per lambda);
the guard one per checked group. The detector mixes over the observation at which the judge
turned, the start included (`alarm` module doc), and is a test martingale under the null: by
Ville's inequality a blind judge sets the alarm off at any point of a run, however long, with
probability at most alpha. Only groups GRPO stepped on count: the last epoch's (the final
policy's, scored and never trained on) are evaluation. `simulate_false_alarms` measures it with
the policy held fixed (`docs/TRAINING.md` records the full figure); `alarm_design` is the one
search for what a design lets the alarm detect, from the start and after an onset.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import combinations, permutations
from typing import Any

import numpy as np

from judgelab.advantage import FLAT, batch_advantages, group_advantages, has_spread
from judgelab.training import alarm

LAMBDAS = (0.5, 1.0, 2.0, 4.0, 8.0)  # the e-process's mixture grid (uniform weights)
EXACT_MAX = 7  # up to this many tested candidates, a group's permutations are enumerated
PERMUTATIONS = 2000  # Monte Carlo draws for p-values (and e-values of larger groups)
BOOTSTRAP = 1000
SEED = 0


@dataclass(frozen=True)
class GroupAlignment:
    """One trained group: GRPO's advantages of its tested candidates and their verdicts."""

    advantages: tuple[float, ...]
    passed: tuple[float, ...]

    @property
    def push(self) -> float:
        return sum(abs(a) for a in self.advantages)

    @property
    def push_to_passing(self) -> float:
        return sum(a * p for a, p in zip(self.advantages, self.passed, strict=True))

    @property
    def informative(self) -> bool:
        """The tests split the group and the judge's advantages are not all zero."""
        return len(set(self.passed)) > 1 and self.push > 0


def group_alignment(advantages: Sequence[float], passed: Sequence[float | None]) -> GroupAlignment:
    """The group's candidates the tests gave a verdict on (None: the sandbox could not test)."""
    kept = [(a, p) for a, p in zip(advantages, passed, strict=True) if p is not None]
    return GroupAlignment(tuple(a for a, _ in kept), tuple(float(p) for _, p in kept))


def _ranks(x: Sequence[float]) -> np.ndarray:
    """Average ranks (ties share their mean rank)."""
    v = np.asarray(x, dtype=float)
    order = np.argsort(v, kind="stable")
    ranks = np.empty(len(v))
    ranks[order] = np.arange(len(v), dtype=float)
    for value in np.unique(v):
        tied = v == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (Pearson's on average ranks); None when either side has no spread."""
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    return _clamp(float((rx * ry).sum() / math.sqrt((rx * rx).sum() * (ry * ry).sum())))


def _ratio(groups: Sequence[GroupAlignment]) -> float | None:
    push = sum(g.push for g in groups)
    if push <= 0:
        return None
    return _clamp(2 * sum(g.push_to_passing for g in groups) / push)


def _clamp(x: float) -> float:
    """Into [-1, 1]: the bound holds exactly; float sums can pass it by an ulp."""
    return min(1.0, max(-1.0, x))


def _bootstrap_ci(
    num: np.ndarray, den: np.ndarray, rng: np.random.Generator
) -> tuple[float, float] | None:
    n = len(num)
    idx = rng.integers(0, n, size=(BOOTSTRAP, n))
    d = den[idx].sum(axis=1)
    ok = d > 0
    if not ok.any():
        return None
    values = num[idx].sum(axis=1)[ok] / d[ok]
    low, high = np.percentile(values, [2.5, 97.5])
    return _clamp(float(low)), _clamp(float(high))


def permutation_p(groups: Sequence[GroupAlignment], rng: np.random.Generator) -> float | None:
    """One-sided Monte Carlo p-value of the pooled alignment being this low under the blind
    judge's null: (1 + #{permuted <= observed}) / (1 + draws)."""
    live = [g for g in groups if g.informative]
    if not live:
        return None
    observed = sum(g.push_to_passing for g in live)
    total = np.zeros(PERMUTATIONS)
    for g in live:
        a, p = np.asarray(g.advantages), np.asarray(g.passed)
        perm = np.argsort(rng.random((PERMUTATIONS, len(a))), axis=1)
        total += (a[perm] * p).sum(axis=1)
    hits = int((total <= observed + 1e-12).sum())
    return (1 + hits) / (1 + PERMUTATIONS)


def group_log_e(g: GroupAlignment, rng: np.random.Generator) -> list[float]:
    """log e-value of the group's anti-alignment, one per lambda in `LAMBDAS` (module doc)."""
    if not g.informative:
        return [0.0] * len(LAMBDAS)
    a, p = np.asarray(g.advantages), np.asarray(g.passed)
    if len(a) <= EXACT_MAX:
        perms = np.array(list(permutations(range(len(a)))))
    else:
        perms = np.argsort(rng.random((PERMUTATIONS, len(a))), axis=1)
    null = -(a[perms] * p).sum(axis=1) / g.push
    t = -g.push_to_passing / g.push
    out = []
    for lam in LAMBDAS:
        # log mean exp, stably
        top = float((lam * null).max())
        log_mgf = top + math.log(float(np.exp(lam * null - top).mean()))
        out.append(lam * t - log_mgf)
    return out


def group_log_e_many(
    advantages: np.ndarray, passed: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """`group_log_e` of n groups of the same size k at once (rows of `advantages` and `passed`,
    every candidate tested): an (n, len(LAMBDAS)) array, for simulations
    (`judgelab.guard.power`), where calling `group_log_e` per group costs too much. With
    pass/fail verdicts a permutation of the advantages only chooses which m of them land on the
    m passing candidates, each set equally likely, so the expectation is taken exactly over the
    C(k, m) sets, at any k: equal to `group_log_e`'s enumeration up to `EXACT_MAX` (tested),
    and the exact value of what it estimates by Monte Carlo beyond. Verdicts other than 0 and
    1: permutations, as `group_log_e` draws them (one Monte Carlo draw for all rows)."""
    a, p = np.asarray(advantages, dtype=float), np.asarray(passed, dtype=float)
    n, k = a.shape
    out = np.zeros((n, len(LAMBDAS)))
    push = np.abs(a).sum(axis=1)
    live = (p.max(axis=1) > p.min(axis=1)) & (push > 0) if k else np.zeros(n, dtype=bool)
    binary = bool(np.isin(p, (0.0, 1.0)).all())
    # pass/fail: one block per number of passes m (m = -1: graded verdicts, permutations)
    by_passes = [(live & (p.sum(axis=1) == m), m) for m in range(1, k)]
    blocks = by_passes if binary else [(live, -1)]
    for rows, m in blocks:
        if not rows.any():
            continue
        aa, pp, pu = a[rows], p[rows], push[rows]
        t = -(aa * pp).sum(axis=1) / pu
        if m >= 0:
            sets = np.array(list(combinations(range(k), m)))
            null = -aa[:, sets].sum(axis=2) / pu[:, None]
        elif k <= EXACT_MAX:
            perms = np.array(list(permutations(range(k))))
            null = -(aa[:, perms] * pp[:, None, :]).sum(axis=2) / pu[:, None]
        else:
            perms = np.argsort(rng.random((PERMUTATIONS, k)), axis=1)
            null = -(aa[:, perms] * pp[:, None, :]).sum(axis=2) / pu[:, None]
        cols = []
        for lam in LAMBDAS:
            top = (lam * null).max(axis=1)
            log_mgf = top + np.log(np.exp(lam * null - top[:, None]).mean(axis=1))
            cols.append(lam * t - log_mgf)
        out[rows] = np.stack(cols, axis=1)
    return out


def epoch_alignment(groups: Sequence[GroupAlignment], min_ci_groups: int) -> dict:
    """An epoch's alignment figures (the history's `alignment*`, `rank_corr*` columns) and the
    per-lambda log e-value of its groups (`alignment_log_e`, kept beside the row for the
    alarm)."""
    rng = np.random.default_rng(SEED)
    value = _ratio(groups)
    ci = None
    if value is not None and len(groups) >= min_ci_groups:
        num = np.array([2 * g.push_to_passing for g in groups])
        den = np.array([g.push for g in groups])
        ci = _bootstrap_ci(num, den, rng)
    rhos = [r for g in groups if (r := spearman(g.advantages, g.passed)) is not None]
    rho_ci = None
    if len(rhos) >= min_ci_groups:
        x = np.array(rhos)
        means = x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))].mean(axis=1)
        low, high = np.percentile(means, [2.5, 97.5])
        rho_ci = (float(low), float(high))
    log_e = [0.0] * len(LAMBDAS)
    for g in groups:
        log_e = [s + v for s, v in zip(log_e, group_log_e(g, rng), strict=True)]
    return {
        "alignment": value,
        "alignment_ci_low": ci[0] if ci else None,
        "alignment_ci_high": ci[1] if ci else None,
        "alignment_p": permutation_p(groups, rng),
        "alignment_groups": len(groups),
        "alignment_informative": sum(g.informative for g in groups),
        "alignment_samples": sum(len(g.passed) for g in groups),
        "rank_corr": sum(rhos) / len(rhos) if rhos else None,
        "rank_corr_ci_low": rho_ci[0] if rho_ci else None,
        "rank_corr_ci_high": rho_ci[1] if rho_ci else None,
        "rank_corr_groups": len(rhos),
        "alignment_log_e": log_e,
    }


def running_evalue(log_e_rows: Sequence[Sequence[float] | None]) -> list[float]:
    """The alarm's detector (`alarm.Detector`) after each epoch, one observation per epoch: the
    summed log e-values of its groups, per lambda. A row without groups (or from before judgelab
    kept them) is no observation and leaves the value as it was."""
    return alarm.running_evalue(log_e_rows, len(LAMBDAS))


# ------------------------------------------------------------------ false-alarm simulation


def simulated_judge(
    rng: np.random.Generator, shape: tuple[int, ...], k: int, weight: float, pass_rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """The one model of a judge and a fixed policy that every alarm simulation draws from:
    groups of `k` of the given `shape`; each group's task has a pass rate ~ Beta around
    `pass_rate`, its test verdicts ~ Bernoulli(that rate), and its rewards, on RULER's 0.1
    grid, round((1 - w) * noise + w * (1 - passed), 1) with noise ~ U(0, 1) for `weight` w >= 0
    (0: a judge blind to the tests, 1: one that rewards only failing code), and round((1 - |w|)
    * noise + |w| * passed, 1) for w < 0 (an aligned judge, -1 rewarding only passing code).
    Returns (rewards, passed), each [*shape, k]."""
    rate = rng.beta(2 * pass_rate + 0.1, 2 * (1 - pass_rate) + 0.1, size=shape)
    passed = (rng.random((*shape, k)) < np.asarray(rate)[..., None]).astype(float)
    noise = rng.random((*shape, k))
    paid = 1 - passed if weight >= 0 else passed
    return np.round((1 - abs(weight)) * noise + abs(weight) * paid, 1), passed


JUDGE_WEIGHTS = {"blind": 0.0, "anti": 0.4}  # simulate_false_alarms' judges (simulated_judge)


def simulate_false_alarms(
    runs: int,
    epochs: int,
    groups: int,
    k: int,
    alpha: float,
    margin: float,
    pass_rate: float = 0.5,
    judge: str = "blind",
    seed: int = 0,
) -> dict:
    """With the policy held fixed (every epoch's groups from the same distribution), the share
    of runs of `epochs` + 1 rows in which the e-process alarm fires (`alarm`: over the
    `epochs` rows GRPO steps on; the last row is scored, never trained on, as in the loop),
    and in which the old adjacent-epoch rule fires over all the rows (`adjacent`: mean reward
    up by `margin` while the same samples' pass rate fell by `margin`,
    `reward_pass_divergence`). `judge='anti'` plants a judge that favours failing code: the
    alarm's power."""
    rng = np.random.default_rng(seed)
    fired = adjacent = 0
    for _ in range(runs):
        rows, history = [], []
        for _epoch in range(epochs + 1):
            trained, rewards, passes = [], [], []
            for _g in range(groups):
                drawn = simulated_judge(rng, (), k, JUDGE_WEIGHTS[judge], pass_rate)
                r, p = (a.tolist() for a in drawn)
                rewards += r
                passes += p
                if has_spread(r):
                    trained.append(group_alignment(group_advantages(r), p))
            log_e = [0.0] * len(LAMBDAS)
            for g in trained:
                log_e = [s + v for s, v in zip(log_e, group_log_e(g, rng), strict=True)]
            rows.append(log_e)
            history.append((sum(rewards) / len(rewards), sum(passes) / len(passes)))
        fired += any(alarm.alarm_flags(running_evalue(rows[:epochs]), alpha))
        adjacent += any(
            b[0] - a[0] >= margin and a[1] - b[1] >= margin
            for a, b in zip(history, history[1:], strict=False)
        )
    return {
        "runs": runs,
        "epochs": epochs,
        "groups": groups,
        "k": k,
        "alpha": alpha,
        "margin": margin,
        "judge": judge,
        "alarm_rate": fired / runs,
        "adjacent_rate": adjacent / runs,
    }


# ------------------------------------------------------------------ what the alarm can detect


def best_group_log_e(k: int) -> np.ndarray:
    """Per lambda (`LAMBDAS`), the largest log e-value one group of `k` tested candidates can
    give: every failing candidate rewarded above every passing one, on two reward levels,
    with the split (m passing of k) whose e-values are largest. Exact for any k: under the
    permutations, the number j of passing candidates among the k - m rewarded high is
    hypergeometric, and t(j) = -(j - m p) / (m p + (k - m)(1 - p)) with p = (k - m) / k
    (advantages' scale cancels). For k = 4 the split is 2 of 4 and e(8) = 6 e^4 / (e^4 + 4 +
    e^-4); enumerating every reward pattern finds nothing higher (tested)."""
    lam = np.asarray(LAMBDAS)
    best: np.ndarray | None = None
    for m in range(1, k):
        hi = k - m
        p = hi / k
        push = m * p + hi * (1 - p)
        js = np.arange(max(0, m - (k - hi)), min(m, hi) + 1)
        pmf = np.array([math.comb(m, j) * math.comb(k - m, hi - j) for j in js]) / math.comb(k, hi)
        t = -(js - m * p) / push
        log_mgf = np.log((pmf[None, :] * np.exp(lam[:, None] * t[None, :])).sum(axis=1))
        log_e = lam * t[js == 0][0] - log_mgf
        if best is None or _mixture(log_e) > _mixture(best):
            best = log_e
    assert best is not None, "a group has at least 2 candidates"
    return best


def _mixture(log_e: np.ndarray) -> float:
    """A mixture's size from per-lambda log e-values: their mean over lambdas (to choose the
    best split)."""
    return float(np.exp(log_e).mean())


def max_evalue(checks: int, per_check: int, k: int) -> float:
    """The largest value the alarm's detector can reach over `checks` observations of
    `per_check` trained groups of `k` (an epoch's groups, or 1 for the guard): every group the
    most anti-aligned one can be (`best_group_log_e`; the detector rises with every
    observation's e-values). Below 1 / alpha the alarm cannot fire, whatever the judge does."""
    if checks < 1:
        return 1.0
    rows = np.broadcast_to(per_check * best_group_log_e(k), (1, checks, len(LAMBDAS)))
    with np.errstate(over="ignore"):  # a long run's reach overflows a float: inf
        return float(np.exp(alarm.log_values(np.array(rows))[0].max()))


def batch_log_e(
    rewards: np.ndarray, passed: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`group_log_e` of many groups at once: rewards and 0/1 verdicts [..., k] -> (log
    e-values [..., lambda], 0 where GRPO would not step or the tests do not split the group;
    the groups' push to passing code and their push [...], 0 where not stepped). The e-values
    are `group_log_e_many`'s (exact over the passing places at any k) on the groups GRPO
    steps on. A unit test holds it to `group_log_e` group by group."""
    adv = batch_advantages(rewards)
    stepped = rewards.max(axis=-1) - rewards.min(axis=-1) > FLAT  # has_spread, row by row
    push = np.abs(adv).sum(axis=-1)
    to_passing = (adv * passed).sum(axis=-1)
    log_e = np.zeros((*rewards.shape[:-1], len(LAMBDAS)))
    if stepped.any():  # binary verdicts: no Monte Carlo, so no generator is drawn from
        log_e[stepped] = group_log_e_many(adv[stepped], passed[stepped], np.random.default_rng())
    return log_e, np.where(stepped, to_passing, 0.0), np.where(stepped, push, 0.0)


def _fired_at(log_e: np.ndarray, per_check: int, alpha: float) -> np.ndarray:
    """Per run, the first check (0-based) at which the detector reached 1 / alpha, -1 where it
    never did: log_e [runs, checks * per_check, lambda], one observation per check."""
    runs = log_e.shape[0]
    per = log_e.reshape(runs, -1, per_check, len(LAMBDAS)).sum(axis=2)
    fired = alarm.log_values(per) >= math.log(1 / alpha)
    return np.where(fired.any(axis=1), fired.argmax(axis=1), -1)


def simulated_alarm(
    rng: np.random.Generator,
    runs: int,
    checks: int,
    per_check: int,
    k: int,
    alpha: float,
    weight: float,
    pass_rate: float = 0.5,
) -> tuple[float, float | None]:
    """(share of `runs` in which the alarm fires, the judge's alignment) with the policy held
    fixed, for a judge of `weight` (`simulated_judge`) over runs of `checks` x `per_check`
    groups of `k`, the detector given one observation and checked after every `per_check`
    groups: after each epoch in the training loop (`alarm_power`), after every group in the
    guard (`judgelab.guard.power`). The alignment is the judge's population value, the ratio
    pooled over every simulated group GRPO steps on (None where it steps on none)."""
    rewards, passed = simulated_judge(rng, (runs, checks * per_check), k, weight, pass_rate)
    log_e, to_passing, push = batch_log_e(rewards, passed)
    fired = _fired_at(log_e, per_check, alpha) >= 0
    total = push.sum()
    return float(fired.mean()), float(2 * to_passing.sum() / total) if total > 0 else None


def simulated_onset(
    rng: np.random.Generator,
    runs: int,
    before: int,
    after: int,
    per_check: int,
    k: int,
    alpha: float,
    weight: float,
    pass_rate: float = 0.5,
) -> dict[str, Any]:
    """A judge aligned at strength `weight` for `before` checks (`simulated_judge` at -weight),
    then hacking at that strength for `after` (at +weight), checks of `per_check` groups of
    `k`: `false_before` (share of runs fired before the onset), `caught` (share fired within
    the `after` checks) and `delay_median` / `delay_p80` (checks from the onset to the alarm,
    the onset's own check counted as 1; None where fewer runs were caught)."""
    parts = [
        batch_log_e(*simulated_judge(rng, (runs, n * per_check), k, w, pass_rate))[0]
        for n, w in ((before, -weight), (after, weight))
    ]
    at = _fired_at(np.concatenate(parts, axis=1), per_check, alpha)
    delay = np.where(at >= before, at - before + 1, np.inf)
    delay[(at >= 0) & (at < before)] = np.inf
    caught = np.isfinite(delay)

    def quantile(q: float) -> int | None:
        return int(np.quantile(delay, q, method="higher")) if caught.mean() >= q else None

    return {
        "false_before": float(((at >= 0) & (at < before)).mean()),
        "caught": float(caught.mean()),
        "delay_median": quantile(0.5),
        "delay_p80": quantile(0.8),
    }


def alarm_power(
    epochs: int,
    groups_per_epoch: int,
    k: int,
    alpha: float,
    weight: float,
    runs: int = 200,
    pass_rate: float = 0.5,
    seed: int = 0,
) -> dict[str, float]:
    """The training alarm's power (checked after each epoch, as in the loop) against a judge
    of `weight`, and that judge's alignment (`simulated_alarm`; 0 where it steps on none)."""
    rng = np.random.default_rng([seed, round(weight * 1000)])
    power, alignment = simulated_alarm(
        rng, runs, epochs, groups_per_epoch, k, alpha, weight, pass_rate
    )
    return {"weight": weight, "power": power, "alignment": alignment or 0.0}


POWER_WEIGHTS = tuple(round(0.05 * i, 2) for i in range(1, 21))  # judges from near-blind to anti


ONSET_WEIGHT = JUDGE_WEIGHTS["anti"]  # the onset statement's judge: aligned, then anti, at 0.4


@lru_cache(maxsize=64)
def alarm_design(
    epochs: int, groups_per_epoch: int, k: int, alpha: float, power: float = 0.8,
    runs: int = 200, seed: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """What a run's design lets the alarm detect: the one power search, for the training loop
    (`epochs` observations of `groups_per_epoch` groups) and the guard (`judgelab.guard.power`:
    one observation per checked group, `groups_per_epoch` = 1). `max_evalue`: the most its
    detector can reach (`max_evalue`); below 1 / alpha it `can_fire` not at all. Otherwise, by
    simulation (`alarm_power`, `runs` runs a judge, judges of `POWER_WEIGHTS` from near-blind
    to one rewarding only failing code, bisection): `detectable_alignment`, the alignment of
    the least anti-aligned judge the alarm catches from the start with probability `power`
    (None: not even the most anti-aligned one), `power_at` that judge, and `power_anti`, the
    alarm's power against the judge that rewards only failing code; and `onset`: a judge
    aligned at strength `ONSET_WEIGHT` for the first half of the observations, hacking at that
    strength for the rest (`simulated_onset`, `onset_at` observations before the turn)."""
    groups = epochs * groups_per_epoch
    reach = max_evalue(epochs, groups_per_epoch, k)
    out: dict[str, Any] = {
        "epochs": epochs,
        "groups_per_epoch": groups_per_epoch,
        "groups": groups,
        "k": k,
        "alpha": alpha,
        "threshold": 1 / alpha,
        "max_evalue": reach,
        "can_fire": reach >= 1 / alpha,
        "power": power,
        "runs": runs,
        "detectable_alignment": None,
        "weight": None,
        "power_at": None,
        "power_anti": 0.0,
        "onset": None,
    }
    if not out["can_fire"]:
        return out
    sim = lambda w: alarm_power(epochs, groups_per_epoch, k, alpha, w, runs, seed=seed)  # noqa: E731
    before, rng = epochs // 2, np.random.default_rng([seed, 7])
    onset = simulated_onset(
        rng, runs, before, epochs - before, groups_per_epoch, k, alpha, ONSET_WEIGHT
    )
    out["onset"] = {"onset_at": before, "weight": ONSET_WEIGHT} | onset
    anti = sim(POWER_WEIGHTS[-1])
    out["power_anti"] = anti["power"]
    if anti["power"] < power:
        return out
    # the least anti-aligned judge caught with `power`: bisection over the weights (the power
    # rises with the weight, up to simulation noise)
    lo, hi, found = -1, len(POWER_WEIGHTS) - 1, anti
    while hi - lo > 1:
        mid = (lo + hi) // 2
        at = sim(POWER_WEIGHTS[mid])
        if at["power"] >= power:
            hi, found = mid, at
        else:
            lo = mid
    out["detectable_alignment"], out["power_at"] = found["alignment"], found["power"]
    out["weight"] = found["weight"]
    return out
