"""The audit's prediction of the training effect: the statistics against scipy and a hand
case, the bootstrap's behaviour on known signals, and the sentences against the figures."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as scipy_stats

from judgelab.analysis.prediction import (
    effect_check,
    ols,
    predict,
    ranks,
    seed_interval,
    spearman,
)
from judgelab.report.prediction import check_sentence, sentence, study_markdown, verdict


def test_spearman_and_ols_against_scipy_with_ties() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, 12).astype(float)  # ties
    y = rng.normal(size=12)
    assert spearman(x, y) == pytest.approx(scipy_stats.spearmanr(x, y).statistic, abs=1e-12)
    fit = scipy_stats.linregress(x, y)
    assert ols(x, y) == pytest.approx((fit.slope, fit.intercept), abs=1e-12)
    assert list(ranks([3.0, 1.0, 3.0, 2.0])) == [3.5, 1.0, 3.5, 2.0]


def test_hand_case() -> None:
    # x = 0, 1, 2; y = 1, 3, 2: ranks (1, 2, 3) and (1, 3, 2): ρ = 1 - 6·2 / (3·8) = 0.5;
    # slope = Σ(x - 1)(y - 2) / Σ(x - 1)² = ((-1)(-1) + 0 + (1)(0)) / 2 = 0.5, intercept 1.5
    assert spearman([0, 1, 2], [1, 3, 2]) == pytest.approx(0.5)
    assert ols([0, 1, 2], [1, 3, 2]) == pytest.approx((0.5, 1.5))


def _effects(arms: dict[str, float], slope: float, noise: float, seeds: int) -> list[dict]:
    rng = np.random.default_rng(1)
    return [{"arm": a, "seed": s, "effect": slope * x + noise * rng.normal()}
            for a, x in arms.items() for s in range(seeds)]  # fmt: skip


ARMS = {f"flip-{f}": 1 - 2 * f for f in (0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)} | {"placebo": 0.02}


def test_a_dose_response_is_predicted_and_noise_is_not() -> None:
    strong = predict("signal_fidelity", ARMS, _effects(ARMS, 0.01, 0.002, 3), 6, 1000, 0)
    assert strong["n_arms"] == 8 and strong["n_points"] == 24
    assert strong["spearman_ci_low"] > 0.5 and strong["slope_ci_low"] > 0
    assert strong["slope"] == pytest.approx(0.01, abs=0.002)
    assert verdict(strong) == "predicts"
    null = predict("signal_fidelity", ARMS, _effects(ARMS, 0.0, 0.01, 3), 6, 1000, 0)
    assert null["spearman_ci_low"] < 0 < null["spearman_ci_high"]
    assert verdict(null) == "does not predict"
    inverted = predict("signal_fidelity", ARMS, _effects(ARMS, -0.01, 0.002, 3), 6, 1000, 0)
    assert verdict(inverted) == "predicts inverted"


def test_seed_spread_widens_the_interval() -> None:
    tight = predict("f", ARMS, _effects(ARMS, 0.01, 0.001, 4), 6, 1000, 0)
    loose = predict("f", ARMS, _effects(ARMS, 0.01, 0.02, 4), 6, 1000, 0)
    width = lambda p: p["slope_ci_high"] - p["slope_ci_low"]  # noqa: E731
    assert width(loose) > 3 * width(tight)


def test_no_ci_from_too_few_arms_and_no_figure_below_three() -> None:
    four = {k: ARMS[k] for k in list(ARMS)[:4]}
    few = predict("signal_fidelity", four, _effects(four, 0.01, 0.001, 2), 6, 500, 0)
    assert few["spearman"] is not None and few["spearman_ci_low"] is None
    assert few["reason"] == "n = 4 arms: too few for a CI (minimum 6)"
    assert verdict(few) == "cannot tell"
    assert "cannot be told (n = 4 arms: too few for a CI (minimum 6))" in sentence(few)
    two = {k: ARMS[k] for k in list(ARMS)[:2]}
    assert predict("f", two, _effects(two, 1, 0, 1), 6, 500, 0)["spearman"] is None
    # an arm without an audit figure or without an effect is left out
    missing = dict(ARMS) | {"placebo": None}
    assert predict("f", missing, _effects(ARMS, 0.01, 0, 1), 6, 0, 0)["n_arms"] == 7


def test_sentences_state_the_figures() -> None:
    pred = predict("signal_fidelity", ARMS, _effects(ARMS, 0.01, 0.002, 3), 6, 1000, 0)
    text = sentence(pred)
    assert text.startswith("The audit's signal_fidelity predicts the training effect: ")
    assert f"ρ = {pred['spearman']:.3f} [{pred['spearman_ci_low']:.2f}, " in text
    assert f"slope {pred['slope']:.3g} [{pred['slope_ci_low']:.3g}, " in text
    assert "n = 8 arms × 3 seeds" in text
    page = study_markdown([pred, pred], {"bank_samples": 16, "bank_tasks": 4,
                                         "bank_contrast_tasks": 3}, {"total": 61.0})  # fmt: skip
    assert "| flip-0 | 1.000 |" in page and "3 with a passing and a failing" in page
    assert page.count("predicts the training effect") == 2


def test_an_arms_seed_interval_is_students_and_absent_below_three_seeds() -> None:
    x = [0.01, 0.03, 0.02, 0.06]
    want = scipy_stats.t.interval(0.95, 3, loc=np.mean(x), scale=scipy_stats.sem(x))
    assert seed_interval(x) == pytest.approx(want, abs=1e-12)
    assert seed_interval(x[:2]) == (None, None)
    pred = predict("f", ARMS, _effects(ARMS, 0.01, 0.002, 3), 6, 0, 0)
    assert all(row["effect_ci"][0] is not None for row in pred["arms"])
    page = study_markdown([pred], {}, {})
    low, high = pred["arms"][0]["effect_ci"]
    assert f"[{low:.5f}, {high:.5f}]" in page


def _rows(effects: dict[str, list[float]]) -> list[dict]:
    return [{"arm": a, "seed": s, "effect": e} for a, es in effects.items()
            for s, e in enumerate(es)]  # fmt: skip


FLIPS = {"flip-0": 0.0, "flip-0.5": 0.5, "flip-1": 1.0}


def test_the_effect_check_by_hand() -> None:
    # planted means 2, 0, -2 (falling: rho = -1); seed 2 alone rises (1, 2, 3).
    # placebo 0.1, -0.1, 0.3: mean 0.1, sd 0.2, t(0.975, 2) = 4.3027 -> 0.1 +- 0.4969
    effects = {"flip-0": [3.0, 2.0, 1.0], "flip-0.5": [0.0, -2.0, 2.0],
               "flip-1": [-4.0, -5.0, 3.0], "placebo": [0.1, -0.1, 0.3]}  # fmt: skip
    check = effect_check(_rows(effects), FLIPS, "placebo")
    assert check["flips"] == [0.0, 0.5, 1.0] and check["planted_means"] == [2.0, 0.0, -2.0]
    assert check["spearman"] == pytest.approx(-1.0)
    assert (check["seeds_falling"], check["n_seeds"]) == (2, 3)
    half = scipy_stats.t.ppf(0.975, 2) * 0.2 / np.sqrt(3)
    assert check["placebo_mean"] == pytest.approx(0.1)
    assert check["placebo_ci"] == pytest.approx([0.1 - half, 0.1 + half])
    assert check["placebo_covers_zero"] is True and check["holds"] is True
    text = check_sentence(check)
    assert text.startswith("The effect measure passes its check")
    assert "ρ = -1.00 over 3 rates; falling in 2 of 3 seeds" in text
    assert f"[{0.1 - half:.5f}, {0.1 + half:.5f}] over 3 seeds, covers 0" in text


def test_the_effect_check_fails_on_a_moving_placebo_or_a_rising_dose() -> None:
    falling = {"flip-0": [3.0, 2.0, 1.0], "flip-0.5": [0.0, 0.0, 0.0],
               "flip-1": [-3.0, -2.0, -1.0]}  # fmt: skip
    moved = effect_check(_rows(falling | {"placebo": [1.0, 1.1, 0.9]}), FLIPS, "placebo")
    assert moved["placebo_covers_zero"] is False and moved["holds"] is False
    assert "FAILS its check" in check_sentence(moved) and "does not cover 0" in check_sentence(
        moved
    )
    rising = {a: [-e for e in es] for a, es in falling.items()}
    up = effect_check(_rows(rising), FLIPS, None)
    assert up["spearman"] == pytest.approx(1.0) and up["holds"] is False
    assert "does not fall" in check_sentence(up)
    two = effect_check(_rows({"flip-0": [1.0], "flip-1": [-1.0]}), FLIPS, None)
    assert two["holds"] is None and "could not be checked" in check_sentence(two)


def _terms(values: dict[str, list[tuple[float, float]]]) -> list[dict]:
    return [{"arm": a, "seed": 0, "task_id": f"t{i:02d}", "n": n, "d": d}
            for a, rows in values.items() for i, (n, d) in enumerate(rows)]  # fmt: skip


def test_pooled_first_order_effects_by_hand_and_paired() -> None:
    from judgelab.analysis.prediction import pooled_effects
    from judgelab.analysis.stats import CIRule

    rng = np.random.default_rng(1)
    base = [(float(rng.normal(1.0, 1.0)), float(rng.choice([2.0, 4.0]))) for _ in range(20)]
    terms = _terms({
        "a": base,
        "double": [(2 * n, d) for n, d in base],  # twice a's numerator: twice its effect and CI
        "none": [(0.0, 0.0)] * 20,  # no group with spread: no step
    })  # fmt: skip
    rule = CIRule(min_ci_groups=15, n_boot=400, seed=3, level=0.95)
    pooled = pooled_effects(terms, 0.1, rule)
    a = pooled["a"]
    assert a["effect"] == pytest.approx(0.1 * sum(n for n, _ in base) / sum(d for _, d in base))
    assert a["stepped_groups"] == a["groups"] == 20 and a["ci_low"] < a["effect"] < a["ci_high"]
    d = pooled["double"]
    assert d["effect"] == pytest.approx(2 * a["effect"])
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((2 * a["ci_low"], 2 * a["ci_high"]))
    assert pooled["none"]["effect"] == 0.0 and pooled["none"]["ci_low"] is None
    assert a["seeds"] == [0] and a["seed_sd"] is None
    # a second seed on the same tasks: the tasks stay the clusters, the seeds' sums add up
    twice = _terms({"a": base}) + [{**t, "seed": 1, "n": 3 * t["n"]} for t in _terms({"a": base})]
    both = pooled_effects(twice, 0.1, rule)["a"]
    assert both["groups"] == 20 and both["seed_effects"] == pytest.approx(
        [a["effect"], 3 * a["effect"]])  # fmt: skip
    assert both["effect"] == pytest.approx(2 * a["effect"])  # (1 + 3) / 2 over equal D
    assert both["seed_sd"] == pytest.approx(np.std([a["effect"], 3 * a["effect"]], ddof=1))
    few = pooled_effects(_terms({"a": base[:10]}), 0.1, rule)["a"]
    assert few["ci_low"] is None and "10" in few["ci_reason"]  # below the minimum: no CI


def test_the_first_order_check_by_hand() -> None:
    from judgelab.analysis.prediction import first_order_check, pooled_effects
    from judgelab.analysis.stats import CIRule
    from judgelab.report.prediction import first_order_sentence

    wobble = [1.0 + 0.5 * np.sin(i) for i in range(20)]
    sign = [(-1.0) ** i for i in range(20)]
    terms = _terms({
        "flip-0": [(w, 1.0) for w in wobble],
        "flip-0.5": [(0.2 * s * w, 1.0) for s, w in zip(sign, wobble, strict=True)],
        "flip-1": [(-w, 1.0) for w in wobble],
        "placebo": [(s * w, 1.0) for s, w in zip(sign, wobble, strict=True)],
    })  # fmt: skip
    rule = CIRule(min_ci_groups=15, n_boot=400, seed=0, level=0.95)
    pooled = pooled_effects(terms, 1.0, rule)
    flips = {"flip-0": 0.0, "flip-0.5": 0.5, "flip-1": 1.0}
    check = first_order_check(pooled, flips, "placebo", rule)
    e = [pooled[a]["effect"] for a in ("flip-0", "flip-0.5", "flip-1")]
    slope = e[2] - e[0]  # least squares at rates 0, 0.5, 1: (0.5 e2 - 0.5 e0) / 0.5
    assert check["slope"] == pytest.approx(slope) and check["slope"] == pytest.approx(-2 * e[0])
    low, high = check["slope_ci"]
    assert low < check["slope"] < high < 0
    assert check["placebo_covers_zero"] and check["tests_detected"] and check["holds"]
    text = first_order_sentence(check)
    assert text.startswith("The effect measure passes its check: the planted arms' effect falls")
    assert f"{check['slope']:.3g}" in text and "covers 0" in text and "is seen" in text

    # a rising dose (the flips' labels swapped) fails, and the sentence says so
    rising = first_order_check(pooled, {"flip-0": 1.0, "flip-0.5": 0.5, "flip-1": 0.0},
                               "placebo", rule)  # fmt: skip
    assert rising["slope_ci"][0] > 0 and rising["holds"] is False
    assert first_order_sentence(rising).startswith("The effect measure FAILS its check")
    # too few rates: no slope CI, no verdict
    two = first_order_check(pooled, {"flip-0": 0.0, "flip-1": 1.0}, None, rule)
    assert two["holds"] is None and "could not be checked" in first_order_sentence(two)


def test_judges_against_the_planted_line_by_hand() -> None:
    """Three planted arms on the line effect = 2 · figure, a judge 0.5 above it at figure 0.25,
    another on it; the residuals by hand, Bonferroni over the two judges, and the words."""
    from judgelab.analysis.prediction import judges_vs_planted, pooled_effects
    from judgelab.analysis.stats import CIRule
    from judgelab.report.prediction import judges_sentence

    wobble = [1.0 + 0.3 * np.sin(i) for i in range(20)]
    effects = {"flip-0": 2.0, "flip-0.5": 0.0, "flip-1": -2.0, "judge-up": 1.0,
               "judge-on": 0.5, "placebo": 0.0}  # fmt: skip
    figures = {"flip-0": 1.0, "flip-0.5": 0.0, "flip-1": -1.0, "judge-up": 0.25,
               "judge-on": 0.25, "placebo": 0.9}  # fmt: skip
    # each task's n = effect · d (d = its wobble), with task-to-task noise that sums to 0
    noise = [0.4 * (-1.0) ** i for i in range(20)]
    terms = _terms({a: [(e * w + z, w) for w, z in zip(wobble, noise, strict=True)]
                    for a, e in effects.items()})  # fmt: skip
    rule = CIRule(min_ci_groups=15, n_boot=400, seed=0, level=0.95)
    pooled = pooled_effects(terms, 1.0, rule)
    audits = {a: {"signal_fidelity": f} for a, f in figures.items()}
    flips = {"flip-0": 0.0, "flip-0.5": 0.5, "flip-1": 1.0}
    vs = judges_vs_planted(pooled, audits, flips, "placebo", rule)
    assert vs["planted"] == ["flip-0", "flip-0.5", "flip-1"]  # the placebo is no planted arm
    # least squares through (1, e0), (0, e.5), (-1, e1) by hand
    e = [pooled[a]["effect"] for a in ("flip-1", "flip-0.5", "flip-0")]
    assert vs["slope"] == pytest.approx((e[2] - e[0]) / 2)
    assert vs["intercept"] == pytest.approx(sum(e) / 3)
    up, on = vs["judges"]["judge-up"], vs["judges"]["judge-on"]
    assert set(vs["judges"]) == {"judge-up", "judge-on"}
    for j, arm in ((up, "judge-up"), (on, "judge-on")):
        predicted = vs["intercept"] + vs["slope"] * 0.25
        assert j["predicted"] == pytest.approx(predicted)
        assert j["residual"] == pytest.approx(pooled[arm]["effect"] - predicted)
        assert j["ci_level"] == pytest.approx(0.975) and j["n_tasks"] == 20
    assert up["residual"] == pytest.approx(0.5, abs=0.02)
    assert up["ci_low"] > 0 and on["ci_low"] < 0 < on["ci_high"]
    text = judges_sentence(vs)
    assert "97.5% CIs, corrected over the 2 judges" in text
    assert "judge-up moves held-out passing code against failing more than its" in text
    assert "judge-on is not off the line by a valid CI" in text
    assert "cannot tell" not in text  # one judge is off the line
    # each arm's figure redrawn on the resamples: constant draws change nothing, a judge whose
    # figure spreads over the resamples gets a wider CI, and the words say what was redrawn
    const = {a: np.full(rule.n_boot, f) for a, f in figures.items()}
    same = judges_vs_planted(pooled, audits, flips, "placebo", rule, figure_draws=const)
    assert same["figure_resampled"] and not vs["figure_resampled"]
    for arm in ("judge-up", "judge-on"):
        for key in ("residual", "ci_low", "ci_high"):
            assert same["judges"][arm][key] == pytest.approx(vs["judges"][arm][key], abs=1e-12)
    spread = {**const, "judge-up": 0.25 + np.random.default_rng(0).normal(0, 0.5, rule.n_boot)}
    wide = judges_vs_planted(pooled, audits, flips, "placebo", rule, figure_draws=spread)
    w_up = wide["judges"]["judge-up"]
    assert w_up["residual"] == pytest.approx(up["residual"])  # the point is the same
    assert w_up["ci_high"] - w_up["ci_low"] > 2 * (up["ci_high"] - up["ci_low"])
    assert "signal_fidelity and effect redrawn on the same task resamples" in judges_sentence(wide)
    # too few planted arms: no line, and the words say why
    two = judges_vs_planted(pooled, audits, {"flip-0": 0.0, "flip-1": 1.0}, "placebo", rule)
    assert two["slope"] is None and two["judges"] == {}
    assert "could not be set against the planted arms: 2 planted arms" in judges_sentence(two)


def _six_arms() -> tuple[dict, dict, dict]:
    from judgelab.analysis.prediction import pooled_effects
    from judgelab.analysis.stats import CIRule

    wobble = [1.0 + 0.3 * np.sin(i) for i in range(20)]
    effects = {"flip-0": 2.0, "flip-0.5": 0.0, "flip-1": -2.0, "judge-up": 1.0,
               "judge-on": 0.5, "placebo": 0.0}  # fmt: skip
    figures = {"flip-0": 1.0, "flip-0.5": 0.0, "flip-1": -1.0, "judge-up": 0.25,
               "judge-on": 0.25, "placebo": 0.9}  # fmt: skip
    noise = [0.4 * (-1.0) ** i for i in range(20)]
    terms = _terms({a: [(e * w + z, w) for w, z in zip(wobble, noise, strict=True)]
                    for a, e in effects.items()})  # fmt: skip
    rule = CIRule(min_ci_groups=15, n_boot=400, seed=0, level=0.95)
    pooled = pooled_effects(terms, 1.0, rule)
    return pooled, {a: {"signal_fidelity": f} for a, f in figures.items()}, {"rule": rule}


def test_the_placebo_against_the_line_apart_from_the_judges() -> None:
    """The placebo (figure 0.9, effect 0) sits far below the planted line (intercept 0,
    slope 2: it is predicted 1.8): set against it at the judges' level, never counted as one
    of them."""
    from judgelab.analysis.prediction import judges_vs_planted
    from judgelab.report.prediction import placebo_sentence

    pooled, audits, extra = _six_arms()
    flips = {"flip-0": 0.0, "flip-0.5": 0.5, "flip-1": 1.0}
    vs = judges_vs_planted(pooled, audits, flips, "placebo", extra["rule"])
    p = vs["placebo"]
    assert "placebo" not in vs["judges"] and p["arm"] == "placebo"
    predicted = vs["intercept"] + vs["slope"] * 0.9
    assert p["residual"] == pytest.approx(pooled["placebo"]["effect"] - predicted)
    assert p["residual"] == pytest.approx(-1.8, abs=0.05)
    assert p["ci_level"] == pytest.approx(0.975) and p["ci_high"] < 0
    text = placebo_sentence(vs)
    assert "The placebo (signal_fidelity 0.900" in text and "is off the line" in text
    assert f"{p['residual']:+.3g}" in text and "n = 20 tasks" in text
    assert placebo_sentence({"figure": "x"}) == ""


def test_the_arms_apart_and_their_sentence() -> None:
    """Planted arms on a line carry ρ = 1; the judges and the placebo are reported on their
    own, with their ρ by hand: figures (0.25, 0.2, 0.9), effects (1, 0.5, 0) rank (2, 1, 3)
    against (3, 2, 1): ρ = 1 − 6·(1 + 1 + 4) / (3·8) = −0.5."""
    from judgelab.analysis.prediction import arms_apart
    from judgelab.report.prediction import apart_sentence

    figures = {"flip-0": 1.0, "flip-0.5": 0.0, "flip-1": -1.0, "judge-up": 0.25,
               "judge-on": 0.2, "placebo": 0.9}  # fmt: skip
    audits = {a: {"signal_fidelity": f} for a, f in figures.items()}
    effects = {"flip-0": 2.0, "flip-0.5": 0.0, "flip-1": -2.0, "judge-up": 1.0,
               "judge-on": 0.5, "placebo": 0.0}  # fmt: skip
    flips = {"flip-0": 0.0, "flip-0.5": 0.5, "flip-1": 1.0}
    apart = arms_apart(audits, effects, flips, "placebo")
    assert apart["planted"]["spearman"] == pytest.approx(1.0)
    assert apart["others"]["spearman"] == pytest.approx(-0.5)
    assert [r["arm"] for r in apart["others"]["arms"]] == ["placebo", "judge-up", "judge-on"]
    assert apart["others"]["arms"][0]["kind"] == "placebo"
    assert apart["all"]["n_arms"] == 6
    text = apart_sentence(apart)
    assert text.startswith("Apart from the planted arms, the evidence on real rewards is 3 arm")
    assert "placebo (placebo) signal_fidelity 0.900, effect 0" in text
    assert "ρ = -0.500 (n = 3 arms, no CI" in text
    assert "The 3 planted arms are built to lie on one line (ρ = 1.000" in text
    two = arms_apart({k: v for k, v in audits.items() if k != "placebo"}, effects, flips, None)
    assert two["others"]["spearman"] is None
    assert "no rank correlation among them (n = 2 arms" in apart_sentence(two)


def _rewards(seeds: int, differ: bool = False):  # type: ignore[no-untyped-def]
    import polars as pl

    from judgelab.analysis.prediction import reward_frame

    rng = np.random.default_rng(5)
    base = [(f"T{t:02d}", f"T{t:02d}c{i}", float(rng.integers(0, 3)) / 2, bool(rng.random() < 0.5))
            for t in range(20) for i in range(4)]  # fmt: skip
    rows = []
    for s in range(seeds):
        for task, cid, r, p in base:
            reward = (1.0 - r) if differ and s == 1 and task < "T05" else r
            rows.append({"arm": "j", "seed": s, "task_id": task, "candidate_id": cid,
                         "reward": reward, "passed": p})  # fmt: skip
    return reward_frame(rows).sort(pl.col("seed"), descending=True)


def test_seeds_that_share_their_groups_are_one_group_and_one_cluster() -> None:
    """Three seeds training on the same groups with the same rewards add no group: the
    audit is the one-seed audit, figures, CIs and n alike."""
    from judgelab.analysis.prediction import arm_audit, shared_groups
    from judgelab.analysis.stats import CIRule

    rule = CIRule(min_ci_groups=5, n_boot=200, seed=0, level=0.95)
    three, one = _rewards(3), _rewards(1)
    assert shared_groups(three) and not shared_groups(_rewards(3, differ=True))
    a3, a1 = arm_audit(three, rule)["j"], arm_audit(one, rule)["j"]
    assert a3 == a1
    assert a3["signal_fidelity_n_groups"] <= 20 and a3["n_tasks"] == 20


def test_seeds_with_groups_of_their_own_resample_a_task_as_one_cluster() -> None:
    from judgelab.analysis.prediction import _arm_tables, cluster_weights

    cand, truth, clusters = _arm_tables(_rewards(3, differ=True))["j"]
    assert len(truth.tasks) == 60 and sorted(set(clusters)) == [f"T{t:02d}" for t in range(20)]
    assert all(g.split("|", 1)[1] == c for g, c in zip(truth.tasks, clusters, strict=True))
    w = cluster_weights(clusters, 50, 0)
    assert w.shape == (50, 60)
    for task in set(clusters):
        cols = [i for i, c in enumerate(clusters) if c == task]
        assert (w[:, cols] == w[:, cols[:1]]).all()  # a task's seeds drawn together
    assert (w.sum(axis=1) == 3 * 20).all()  # 20 tasks drawn, each with its 3 groups
