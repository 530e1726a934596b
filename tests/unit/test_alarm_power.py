"""What the reward-hacking alarm can detect in a run's design: the most its detector can
reach (closed form, checked by hand and by enumerating reward patterns), whether it can fire
at all, and by simulation the alignment it catches with 80 % power (checked against the
group-by-group e-values and the independent run-by-run simulation)."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest

from judgelab.advantage import group_advantages, has_spread
from judgelab.training import alignment as al

LAMBDAS = np.array(al.LAMBDAS)


def hand_best_e() -> np.ndarray:
    """Two passing and two failing candidates, the failing ones rewarded above: advantages
    ±1, t = 1/2; under the 6 equally likely placements of the passes t is 1/2 once, 0 four
    times and -1/2 once, so e(lambda) = e^(lambda/2) / ((e^(lambda/2) + 4 + e^(-lambda/2)) / 6)."""
    return 6 * np.exp(LAMBDAS / 2) / (np.exp(LAMBDAS / 2) + 4 + np.exp(-LAMBDAS / 2))


def test_the_most_two_groups_of_four_reach_is_the_hand_computed_value() -> None:
    e = hand_best_e()
    assert np.exp(al.best_group_log_e(4)) == pytest.approx(e)
    # the detector (training.alarm): change at observation 1 weighs 0.9, at 2 0.1 / 2, the
    # change points still to come 0.1 / n after n observations
    assert al.max_evalue(1, 1, 4) == pytest.approx(0.9 * e.mean() + 0.1)  # 2.726
    two = 0.9 * (e**2).mean() + 0.05 * e.mean() + 0.05
    assert al.max_evalue(2, 1, 4) == pytest.approx(two) == pytest.approx(10.176, abs=1e-3)
    # two groups in one observation (an epoch): the from-start term only, and the tail
    assert al.max_evalue(1, 2, 4) == pytest.approx(0.9 * (e**2).mean() + 0.1)


def test_no_reward_pattern_beats_the_closed_form() -> None:
    """Every reward pattern on a 3-level grid and every test pattern of a group of 4, through
    the loop's own `group_log_e`: the best single group and the best pair of groups reach
    exactly `max_evalue`, never more."""
    rng = np.random.default_rng(0)
    vectors = []
    for rewards in product((0.0, 0.5, 1.0), repeat=4):
        if not has_spread(rewards):
            continue
        adv = group_advantages(list(rewards))
        for passed in product((0.0, 1.0), repeat=4):
            log_e = al.group_log_e(al.group_alignment(adv, list(passed)), rng)
            vectors.append(np.exp(log_e))
    e = np.unique(np.round(np.array(vectors), 12), axis=0)
    assert 0.9 * e.mean(axis=1).max() + 0.1 == pytest.approx(al.max_evalue(1, 1, 4))
    pairs = (e @ e.T) / len(al.LAMBDAS)  # mean over lambdas of e_i * e_j
    assert 0.9 * pairs.max() + 0.1 == pytest.approx(al.max_evalue(1, 2, 4))


def test_the_batch_e_values_are_the_loops_group_by_group() -> None:
    rng = np.random.default_rng(3)
    for k in (4, 5):
        rewards = np.round(rng.random((60, k)), 1)
        passed = (rng.random((60, k)) < 0.5).astype(float)
        log_e, to_passing, push = al.batch_log_e(rewards, passed)
        for i in range(60):
            r = rewards[i].tolist()
            if not has_spread(r):
                assert not log_e[i].any() and push[i] == 0
                continue
            g = al.group_alignment(group_advantages(r), passed[i].tolist())
            assert log_e[i] == pytest.approx(al.group_log_e(g, rng), abs=1e-9)
            assert (to_passing[i], push[i]) == pytest.approx((g.push_to_passing, g.push))


def test_a_design_that_cannot_reach_the_threshold_says_so() -> None:
    """The default run: 2 epochs of 1 group of 4 reach e <= 10.2 < 20 = 1/alpha."""
    design = al.alarm_design(2, 1, 4, 0.05)
    assert not design["can_fire"]
    assert design["max_evalue"] == pytest.approx(10.176, abs=1e-3) and design["threshold"] == 20
    assert design["detectable_alignment"] is None and design["power_anti"] == 0.0
    assert design["onset"] is None
    assert al.alarm_design(2, 2, 4, 0.05)["can_fire"]  # 4 groups reach 222
    assert not al.alarm_design(2, 2, 4, 0.001)["can_fire"]  # ... but not 1000


def test_power_rises_with_groups_and_a_blind_judge_stays_under_alpha() -> None:
    """The issue's figure: 2 epochs x 2 groups catch a judge of alignment about -0.5 in about
    a fifth of runs; 4 x 4 in nearly all. A blind judge (weight 0) fires in at most alpha."""
    small = al.alarm_power(2, 2, 4, 0.05, 0.4, runs=1000)
    large = al.alarm_power(4, 4, 4, 0.05, 0.4, runs=1000)
    assert small["alignment"] == pytest.approx(-0.5, abs=0.03)
    assert 0.15 < small["power"] < 0.3 < 0.9 < large["power"]
    blind = al.alarm_power(4, 4, 4, 0.05, 0.0, runs=1000)
    assert abs(blind["alignment"]) < 0.03
    assert blind["power"] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 1000)


def test_the_batch_simulation_agrees_with_the_run_by_run_one() -> None:
    """`simulate_false_alarms`' planted judge (0.6 noise + 0.4 for failing code) is weight 0.4;
    its alarm rate, from its own draws through `group_log_e`, matches `alarm_power`'s within
    Monte Carlo error."""
    runs = 150
    slow = al.simulate_false_alarms(runs, 6, 1, 4, 0.05, 0.1, judge="anti", seed=5)
    fast = al.alarm_power(6, 1, 4, 0.05, 0.4, runs=2000, seed=5)
    sd = math.sqrt(fast["power"] * (1 - fast["power"]) * (1 / runs + 1 / 2000))
    assert abs(slow["alarm_rate"] - fast["power"]) < 4 * sd


def test_the_detectable_alignment_is_where_the_power_is_reached() -> None:
    design = al.alarm_design(4, 4, 4, 0.05)
    assert design["can_fire"] and design["power_anti"] == 1.0
    assert design["power_at"] >= 0.8
    found = design["detectable_alignment"]
    assert -0.6 < found < -0.2
    # the next weaker judge on the grid is caught less often than 80 %
    weights = {round(al.alarm_power(4, 4, 4, 0.05, w)["alignment"], 9): w
               for w in al.POWER_WEIGHTS}  # fmt: skip
    w = weights[round(found, 9)]
    weaker = al.POWER_WEIGHTS[al.POWER_WEIGHTS.index(w) - 1]
    assert al.alarm_power(4, 4, 4, 0.05, weaker)["power"] < 0.8
    # a judge that rewards only failing code cannot make 2 x 2 groups fire 80 % of the time
    short = al.alarm_design(2, 2, 4, 0.05)
    assert short["can_fire"] and short["detectable_alignment"] is None
    assert 0.3 < short["power_anti"] < 0.8
