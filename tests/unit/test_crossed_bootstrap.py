"""The first-order study's crossed bootstrap (`analysis.crossed`): training tasks and bank
tasks resampled together. Each resample's effect and SE against loops written out here, the
CI against an independent studentized bootstrap, the reduction to the whole-bank bootstrap
with one bank task (or banks that all agree), and the bank's spread entering the interval."""

from __future__ import annotations

import numpy as np
import pytest

from judgelab.analysis.crossed import (
    bank_resample_weights,
    crossed_ratio_se,
    crossed_ratios,
    crossed_t_ci,
)
from judgelab.analysis.stats import CIRule, bootstrap_t_ci, resample_weights

RULE = CIRule(min_ci_groups=5, n_boot=300, seed=4, level=0.95)


def _matrix(tasks: int = 12, banks: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    den = rng.choice([0.0, 2.0, 4.0], size=tasks, p=[0.15, 0.5, 0.35])
    num = (rng.normal(0.3, 1.0, (tasks, 1)) + rng.normal(0.0, 0.8, (1, banks))
           + rng.normal(0.0, 0.3, (tasks, banks)))  # fmt: skip
    return np.where(den[:, None] > 0, num, 0.0), den


def _loop_ratio(num: np.ndarray, den: np.ndarray, w: np.ndarray, v: np.ndarray) -> float:
    """effect* = (Σ_t w_t Σ_b v_b N_tb / Σ_b v_b) / Σ_t w_t D_t, written out."""
    top = sum(w[t] * sum(v[b] * num[t, b] for b in range(num.shape[1])) / v.sum()
              for t in range(num.shape[0]))  # fmt: skip
    return top / sum(w[t] * den[t] for t in range(num.shape[0]))


def _loop_se(num: np.ndarray, den: np.ndarray, w: np.ndarray, v: np.ndarray) -> float:
    """The two-way SE (module docstring of `analysis.crossed`), written out."""
    r = _loop_ratio(num, den, w, v)
    used = [t for t in range(num.shape[0]) if den[t] > 0]
    n = sum(w[t] for t in used)
    mean_den = sum(w[t] * den[t] for t in range(num.shape[0])) / n
    tasks = 0.0
    for t in range(num.shape[0]):
        n_t = sum(v[b] * num[t, b] for b in range(num.shape[1])) / v.sum()
        tasks += w[t] * (n_t - r * den[t]) ** 2
    tasks /= mean_den**2 * n * (n - 1)
    k = v.sum()
    bank = 0.0
    for b in range(num.shape[1]):
        r_b = sum(w[t] * num[t, b] for t in range(num.shape[0])) / sum(
            w[t] * den[t] for t in range(num.shape[0]))  # fmt: skip
        bank += v[b] * (r_b - r) ** 2
    bank = bank / (k * (k - 1)) if k > 1 else 0.0
    return float(np.sqrt(tasks + bank))


def test_each_resample_against_loops() -> None:
    num, den = _matrix()
    w = resample_weights(num.shape[0], 6, 1)
    v = bank_resample_weights(num.shape[1], 6, 1)
    got = crossed_ratios(num, den, w, v)
    r, se = crossed_ratio_se(num, den, w, v, den > 0)
    for i in range(6):
        assert got[i] == pytest.approx(_loop_ratio(num, den, w[i], v[i]), rel=1e-12)
        assert r[i] == pytest.approx(got[i], rel=1e-12)
        assert se[i] == pytest.approx(_loop_se(num, den, w[i], v[i]), rel=1e-10)
    # the bank draws are their own stream: not the tasks' under the same seed
    assert not np.array_equal(bank_resample_weights(12, 6, 1), resample_weights(12, 6, 1))


def test_the_interval_against_an_independent_studentized_bootstrap() -> None:
    num, den = _matrix()
    w = resample_weights(num.shape[0], RULE.n_boot, RULE.seed)
    v = bank_resample_weights(num.shape[1], RULE.n_boot, RULE.seed)
    ci = crossed_t_ci(num, den, w, v, RULE.min_ci_groups)
    ones_t, ones_b = np.ones(num.shape[0]), np.ones(num.shape[1])
    r, se = _loop_ratio(num, den, ones_t, ones_b), _loop_se(num, den, ones_t, ones_b)
    t = sorted((_loop_ratio(num, den, w[i], v[i]) - r) / _loop_se(num, den, w[i], v[i])
               for i in range(RULE.n_boot))  # fmt: skip
    # inverted-CDF quantiles: the ceil(q·B)-th smallest
    lo, hi = t[int(np.ceil(0.025 * RULE.n_boot)) - 1], t[int(np.ceil(0.975 * RULE.n_boot)) - 1]
    assert (ci.low, ci.high) == pytest.approx((r - hi * se, r - lo * se), rel=1e-9)
    assert ci.n_groups == int((den > 0).sum()) and ci.reason is None


def test_one_bank_task_or_agreeing_banks_give_the_whole_bank_bootstrap() -> None:
    num, den = _matrix(banks=1)
    w = resample_weights(num.shape[0], RULE.n_boot, RULE.seed)
    whole = bootstrap_t_ci(num[:, 0], den, w, RULE.min_ci_groups)
    one = crossed_t_ci(num, den, w, bank_resample_weights(1, RULE.n_boot, RULE.seed), 5)
    assert (one.low, one.high) == pytest.approx((whole.low, whole.high), rel=1e-12)
    agreeing = np.repeat(num, 5, axis=1)  # every bank task the same: nothing to resample
    same = crossed_t_ci(agreeing, den, w, bank_resample_weights(5, RULE.n_boot, RULE.seed), 5)
    assert (same.low, same.high) == pytest.approx((whole.low, whole.high), rel=1e-9)


def test_the_banks_spread_enters_the_interval() -> None:
    """Every training task gives the same ratio on a bank task, the bank tasks differ: the
    whole-bank bootstrap sees no spread (no CI); the crossed one draws its interval from the
    bank tasks, around the figure."""
    den = np.full(10, 2.0)
    num = np.outer(den, [0.5, 1.0, 1.5, 3.0])  # bank task b's ratio: 0.5, 1, 1.5, 3
    w = resample_weights(10, RULE.n_boot, RULE.seed)
    fixed = bootstrap_t_ci(num.mean(axis=1), den, w, RULE.min_ci_groups)
    assert fixed.low is None and "same value" in (fixed.reason or "")
    crossed = crossed_t_ci(num, den, w, bank_resample_weights(4, RULE.n_boot, RULE.seed), 5)
    assert crossed.low is not None and crossed.high is not None
    assert crossed.low < 1.5 < crossed.high and crossed.high - crossed.low > 0.5
    flat = crossed_t_ci(np.ones((10, 4)), den, w, bank_resample_weights(4, 300, 4), 5)
    assert flat.low is None and "4 bank tasks give the same value" in (flat.reason or "")


def _terms(banks: int, seed: int = 0) -> list[dict]:
    num, den = _matrix(tasks=20, banks=banks, seed=seed)
    return [{"arm": arm, "seed": 0, "task_id": f"t{t:02d}", "n": float(scale * num[t].mean()),
             "d": float(den[t]),
             "n_bank": {f"b{b}": float(scale * num[t, b]) for b in range(banks)}}
            for arm, scale in (("flip-0", 1.0), ("flip-0.5", 0.1), ("flip-1", -1.0),
                               ("judge", 0.5), ("placebo", 0.05))
            for t in range(20)]  # fmt: skip


def test_the_studys_figures_resample_the_bank_where_its_terms_have_it() -> None:
    from judgelab.analysis.prediction import first_order_check, judges_vs_planted, pooled_effects
    from judgelab.report.prediction import bank_sentence, judges_sentence, study_markdown

    rule = CIRule(min_ci_groups=5, n_boot=200, seed=0, level=0.95)
    flips = {"flip-0": 0.0, "flip-0.5": 0.5, "flip-1": 1.0}
    audits = {"flip-0": 1.0, "flip-0.5": 0.0, "flip-1": -1.0, "judge": 0.4, "placebo": 0.1}
    audits = {a: {"signal_fidelity": f} for a, f in audits.items()}
    one = _terms(1)
    plain = [{k: v for k, v in t.items() if k != "n_bank"} for t in one]
    with_bank, without = pooled_effects(one, 1.0, rule), pooled_effects(plain, 1.0, rule)
    for arm, row in without.items():  # one bank task: today's resampling
        assert with_bank[arm]["bank_tasks_resampled"] == 1 and "num_bank" not in row
        for key in ("effect", "ci_low", "ci_high"):
            assert with_bank[arm][key] == pytest.approx(row[key], rel=1e-12), (arm, key)
    for pooled in (with_bank, without):
        check = first_order_check(pooled, flips, "placebo", rule)
        assert check["slope_ci"] == pytest.approx(
            first_order_check(without, flips, "placebo", rule)["slope_ci"], rel=1e-12
        )
    # four bank tasks: the same point, every figure on the crossed draws, said in words
    four = pooled_effects(_terms(4), 1.0, rule)
    assert four["judge"]["bank_tasks_resampled"] == 4
    check = first_order_check(four, flips, "placebo", rule)
    vs = judges_vs_planted(four, audits, flips, "placebo", rule)
    assert check["bank_tasks_resampled"] == vs["bank_tasks_resampled"] == 4
    assert "bank_tasks_resampled" not in first_order_check(without, flips, "placebo", rule)
    assert "same draws of the 4 bank tasks" in judges_sentence(vs)
    bank = {"bank_samples": 16, "bank_tasks": 4, "bank_contrast_tasks": 4}
    assert "and, independently, these 4 bank tasks" in bank_sentence(bank, four)
    assert "hold the bank fixed" in bank_sentence(bank, without)
    assert "hold the bank fixed" in bank_sentence(bank, None)  # steps: over seeds only
    preds = [
        {
            "figure": "signal_fidelity",
            "n_arms": 5,
            "seeds_per_arm": [1],
            "spearman": 0.9,
            "spearman_ci_low": None,
            "spearman_ci_high": None,
            "slope": 1.0,
            "slope_ci_low": None,
            "slope_ci_high": None,
            "reason": "few",
            "arms": [{"arm": a, "audit": m["signal_fidelity"]} for a, m in audits.items()],
        }
    ]
    text = study_markdown(preds, bank, {}, check, four, vs)
    assert "95 % CI over tasks × bank tasks" in text and "crossed bootstrap" in text


def test_the_predictions_bootstrap_draws_the_bank_where_the_effects_have_it() -> None:
    """With every seed's effect the same on each bank task, drawing the bank changes
    nothing; with one bank task neither; with bank tasks that disagree the slope's CI
    widens."""
    from judgelab.analysis.prediction import predict

    rng = np.random.default_rng(2)
    figures = {f"a{i}": x for i, x in enumerate([-1.0, -0.5, 0.0, 0.3, 0.6, 1.0])}
    rows = [{"arm": a, "seed": s, "effect": 2 * x + 0.1 * rng.normal()}
            for a, x in figures.items() for s in range(3)]  # fmt: skip
    plain = predict("f", figures, rows, 6, 300, 5)
    same = [{**r, "bank_effects": {"b0": r["effect"], "b1": r["effect"]}} for r in rows]
    one = [{**r, "bank_effects": {"b0": r["effect"]}} for r in rows]
    for variant in (predict("f", figures, same, 6, 300, 5), predict("f", figures, one, 6, 300, 5)):
        assert variant["bank_tasks_resampled"] in (1, 2)
        for key in ("spearman_ci_low", "spearman_ci_high", "slope_ci_low", "slope_ci_high"):
            assert variant[key] == pytest.approx(plain[key], rel=1e-9), key
    apart = [{**r, "bank_effects": {"b0": 3 * r["effect"], "b1": -r["effect"]}} for r in rows]
    wide = predict("f", figures, apart, 6, 300, 5)
    assert wide["slope"] == pytest.approx(plain["slope"])  # the mean over banks: the same
    assert wide["slope_ci_high"] - wide["slope_ci_low"] > 3 * (
        plain["slope_ci_high"] - plain["slope_ci_low"])  # fmt: skip
    assert "bank_tasks_resampled" not in plain


def test_the_check_counts_the_bank_tasks_the_tests_raise_and_lower() -> None:
    """The tests' own arm's effect per bank task, pooled over tasks (Σ_t N_tb / Σ_t D_t): two
    bank tasks up, one down, one exactly flat (neither), counted and said; none without a
    bank."""
    from judgelab.analysis.prediction import first_order_check, pooled_effects
    from judgelab.report.prediction import first_order_sentence

    rule = CIRule(min_ci_groups=5, n_boot=200, seed=0, level=0.95)
    bank = {"up": 2.0, "down": -1.0, "flat": 0.0, "up2": 0.5}  # N_tb / D_t on every task
    terms = [{"arm": arm, "seed": 0, "task_id": f"t{t}", "d": 1.0 + t % 3,
              "n": sign * (1.0 + t % 3) * sum(bank.values()) / 4,
              "n_bank": {b: sign * (1.0 + t % 3) * v * (1 + 0.1 * t) for b, v in bank.items()}}
             for arm, sign in (("flip-0", 1.0), ("flip-0.5", 0.0), ("flip-1", -1.0))
             for t in range(8)]  # fmt: skip
    flips = {"flip-0": 0.0, "flip-0.5": 0.5, "flip-1": 1.0}
    check = first_order_check(pooled_effects(terms, 1.0, rule), flips, None, rule)
    assert check["tests_bank"] == {"raised": 2, "lowered": 1, "tasks": 4}
    assert ("raising passing against failing code on 2 of the 4 bank tasks and lowering it "
            "on 1") in first_order_sentence(check)  # fmt: skip
    plain = [{k: v for k, v in t.items() if k != "n_bank"} for t in terms]
    without = first_order_check(pooled_effects(plain, 1.0, rule), flips, None, rule)
    assert "tests_bank" not in without and "bank tasks" not in first_order_sentence(without)
