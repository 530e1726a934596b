"""The alarm's e-detector (`judgelab.training.alarm`): its value against a sum over change
points written out by hand, its weights, its state, its vectorised twin, and, in the seeded
simulation of issue 64 (groups of 4, 2 a step, pass rates ~ U(0.2, 0.8), rewards 0.6 noise +
0.4 passed while aligned and 0.6 noise + 0.4 (1 - passed) while hacking, alpha 0.05), what it
catches and how often it fires falsely. bench/guard_onset.py runs the full version through
the guard."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from judgelab.training import alarm
from judgelab.training import alignment as al

ALPHA = 0.05
L = len(al.LAMBDAS)


def by_change_points(rows: list[list[float]]) -> float:
    """D_n written out: sum over every change point j <= n of w_j prod_{i >= j} e_i, mean
    over lambda, plus the weight of the change points after n (0.9 at j = 1, 0.1 / ((j-1) j)
    after, so 0.1 / n still to come)."""
    n = len(rows)
    e = np.exp(np.array(rows))  # [n, lambda]
    weights = [0.9] + [0.1 / ((j - 1) * j) for j in range(2, n + 1)]
    total = sum(w * e[j:].prod(axis=0) for j, w in enumerate(weights))
    return float(np.mean(total)) + (0.1 / n if n else 1.0)


def test_the_detector_is_the_sum_over_change_points() -> None:
    rng = np.random.default_rng(0)
    rows = rng.normal(0, 1, size=(12, L)).tolist()
    detector = alarm.Detector(L)
    assert detector.value == 1.0  # nothing observed: every change point still to come
    for n in range(1, 13):
        detector.update(rows[n - 1])
        assert detector.value == pytest.approx(by_change_points(rows[:n]), rel=1e-12)
    # the vectorised twin used by every simulation
    twin = alarm.log_values(np.array(rows)[None])[0]
    assert np.exp(twin) == pytest.approx(
        [by_change_points(rows[:n]) for n in range(1, 13)], rel=1e-12
    )


def test_the_weights_sum_to_one_and_the_start_keeps_its_share() -> None:
    for n in range(0, 60):
        seen = sum(math.exp(alarm.log_weight(j)) for j in range(1, n + 1))
        assert seen + math.exp(alarm.log_tail(n)) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="count from 1"):
        alarm.log_weight(0)
    # D_n >= FROM_START x the e-process multiplying every observation from the start, so the
    # detector fires whenever that e-process reaches 1 / (FROM_START alpha)
    rows = np.random.default_rng(1).normal(0.3, 1, size=(200, 30, L))
    from_start = np.cumsum(rows, axis=1)
    top = from_start.max(axis=2)
    old = top + np.log(np.exp(from_start - top[..., None]).mean(axis=2))
    assert (alarm.log_values(rows) >= math.log(alarm.FROM_START) + old - 1e-12).all()


def test_state_saved_and_loaded_continues_exactly() -> None:
    rows = np.random.default_rng(2).normal(0, 1, size=(20, L)).tolist()
    whole, first = alarm.Detector(L), alarm.Detector(L)
    for row in rows:
        whole.update(row)
    assert json.loads(json.dumps(first.state_dict()))["log_s"] == [None] * L  # -inf as null
    for row in rows[:7]:
        first.update(row)
    resumed = alarm.Detector(L)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    for row in rows[7:]:
        resumed.update(row)
    assert resumed.state_dict() == whole.state_dict() and resumed.value == whole.value
    with pytest.raises(ValueError, match="for 5 lambdas, not 3"):
        alarm.Detector(3).load_state_dict(whole.state_dict())
    with pytest.raises(ValueError, match="2 log e-values for 5 lambdas"):
        whole.update([0.0, 0.0])


def test_rows_without_groups_are_no_observation() -> None:
    row = [0.5] * L
    values = alarm.running_evalue([row, None, [], row], L)
    assert values[1] == values[2] == values[0]
    assert values[3] == pytest.approx(by_change_points([row, row]))
    assert alarm.alarm_flags([1.0, 25.0, 3.0], ALPHA) == [False, True, True]  # stays raised


def issue_judge(rng: np.random.Generator, runs: int, groups: int, sign: int) -> np.ndarray:
    """The per-group log e-values [runs, groups, lambda] of issue 64's judge: +1 aligned, -1
    hacking, 0 blind (noise alone)."""
    rate = rng.uniform(0.2, 0.8, size=(runs, groups))
    passed = (rng.random((runs, groups, 4)) < rate[..., None]).astype(float)
    noise = rng.random((runs, groups, 4))
    paid = {1: passed, -1: 1 - passed, 0: np.zeros_like(passed)}[sign]
    rewards = noise if sign == 0 else 0.6 * noise + 0.4 * paid
    return al.batch_log_e(rewards, passed)[0]


def first_alarm(log_e: np.ndarray) -> np.ndarray:
    """Per run, the first group (0-based) at which the detector reached 1 / alpha; -1: never."""
    fired = alarm.log_values(log_e) >= math.log(1 / ALPHA)
    return np.where(fired.any(axis=1), fired.argmax(axis=1), -1)


def test_the_issue_simulation_onset_and_false_alarms() -> None:
    rng = np.random.default_rng(64)
    # after 400 aligned groups, hacking: caught within 100 groups in >= 80 % of runs (the
    # e-process it replaced: never, the aligned groups had shrunk it)
    runs = 200
    onset = np.concatenate([issue_judge(rng, runs, 400, +1), issue_judge(rng, runs, 100, -1)], 1)
    at = first_alarm(onset)
    assert ((at >= 0) & (at < 400)).mean() == 0.0
    assert ((at >= 400) & (at < 500)).mean() >= 0.8
    # blind for 1,000 groups, aligned for 400 then blind for 600: at most alpha (3 SE)
    runs = 300
    bound = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / runs)
    assert (first_alarm(issue_judge(rng, runs, 1000, 0)) >= 0).mean() <= bound
    later = np.concatenate([issue_judge(rng, runs, 400, +1), issue_judge(rng, runs, 600, 0)], 1)
    assert (first_alarm(later) >= 0).mean() <= bound
    # hacking from the start: as fast as the replaced e-process within a few points (it fires
    # at 1 / (0.9 alpha) where that one fired at 1 / alpha), by 2 and 4 steps
    start = issue_judge(rng, 1000, 8, -1)
    totals = np.cumsum(start, axis=1)
    top = totals.max(axis=2)
    old = top + np.log(np.exp(totals - top[..., None]).mean(axis=2)) >= math.log(1 / ALPHA)
    at = first_alarm(start)
    for groups in (4, 8):
        ours, theirs = ((at >= 0) & (at < groups)).mean(), old[:, :groups].any(axis=1).mean()
        assert theirs - 0.05 <= ours <= theirs
