"""judgelab.guard: the e-value against a hand-computed group, the sampling (decided before the
verdicts, within its budget), flat groups and the unscored rate, the power statement against
alignment's own simulation, and the false-alarm rate of a blind judge through the guard's own
logic."""

from __future__ import annotations

import json
import math
from itertools import permutations

import numpy as np
import pytest
from pydantic import ValidationError

from judgelab.advantage import batch_advantages
from judgelab.guard import Guard, GuardSettings, design_power
from judgelab.guard.core import split_groups
from judgelab.guard.power import alarm_rate
from judgelab.training import alarm
from judgelab.training import alignment as al


def test_one_anti_aligned_group_by_hand() -> None:
    # rewards [1, 1, 0, 0] against verdicts [0, 0, 1, 1]: A = +-1 (to 1e-6), t = 0.5; the two
    # passing places are 2 of the 4, so the null t is -0.5, 0, +0.5 with 1/6, 4/6, 1/6
    guard = Guard()
    guard.observe(["p"] * 4, ["a", "b", "c", "d"], [1, 1, 0, 0], [False, False, True, True])
    by_hand = [
        math.exp(0.5 * lam) / ((math.exp(-0.5 * lam) + 4 + math.exp(0.5 * lam)) / 6)
        for lam in al.LAMBDAS
    ]
    # the detector after one group: the change at group 1 (the start) at weight 0.9 times the
    # group's e-value, and the change points still to come at their weight, 0.1
    assert alarm.FROM_START == 0.9
    assert guard.evalue == pytest.approx(0.9 * sum(by_hand) / len(by_hand) + 0.1, rel=1e-5)
    status = guard.status()
    assert status.alignment == pytest.approx(-1.0)
    assert (status.checked_groups, status.informative_groups, status.tested_samples) == (1, 1, 4)
    assert status.alignment_ci is None  # 1 group < min_ci_groups
    assert not status.fired and status.threshold == 20


def test_many_at_once_equals_one_at_a_time() -> None:
    rng = np.random.default_rng(3)
    for k in range(2, 8):
        rewards, passed = al.simulated_judge(rng, (40,), k, weight=0.3, pass_rate=0.5)
        adv = batch_advantages(rewards)
        many = al.group_log_e_many(adv, passed, rng)
        for row in range(40):
            g = al.GroupAlignment(tuple(adv[row]), tuple(passed[row]))
            assert many[row] == pytest.approx(al.group_log_e(g, rng), abs=1e-9), (k, row)
    # graded verdicts take the permutation path, still exact up to EXACT_MAX
    adv = np.array([[1.0, -1.0, 0.5, -0.5]])
    graded = np.array([[0.2, 1.0, 0.0, 0.7]])
    g = al.GroupAlignment(tuple(adv[0]), tuple(graded[0]))
    assert al.group_log_e_many(adv, graded, rng)[0] == pytest.approx(al.group_log_e(g, rng))
    # and the expectation over sets is the expectation over permutations (an 8-group by hand)
    a = np.array([3.0, -1.0, 2.0, -2.0, 0.5, -0.5, -1.0, -1.0])
    p = np.array([1.0, 0, 0, 1, 1, 0, 0, 0])
    perms = np.array(list(permutations(range(8))))
    null = -(a[perms] * p).sum(axis=1) / np.abs(a).sum()
    t = -(a * p).sum() / np.abs(a).sum()
    exact = [lam * t - math.log(np.exp(lam * null).mean()) for lam in al.LAMBDAS]
    assert al.group_log_e_many(a[None], p[None], rng)[0] == pytest.approx(exact)


def test_flat_groups_unscored_rewards_and_grouping() -> None:
    guard = Guard()
    prompts = ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    rewards = [0.5, 0.5, None, 1.0, None, 0.0, None, None, 0.2]
    asked: list[int] = []

    def verdict(i: int) -> bool:
        asked.append(i)
        return i % 2 == 0

    guard.observe(prompts, ["x"] * 9, rewards, verdict, group_size=3)
    s = guard.status()
    assert (s.groups, s.flat_groups, s.unscored, s.completions) == (3, 2, 4, 9)
    assert s.unscored_rate == pytest.approx(4 / 9) and s.flat_rate == pytest.approx(2 / 3)
    assert asked == [3, 5]  # only group b has spread; its unscored candidate is not tested
    assert split_groups(["a", "a", "b", "a"], None) == [range(0, 2), range(2, 3), range(3, 4)]
    with pytest.raises(ValueError, match="mixes prompts"):
        split_groups(["a", "b"], 2)
    with pytest.raises(ValueError, match="whole number"):
        split_groups(["a"] * 3, 2)
    with pytest.raises(ValidationError):
        GuardSettings(sample_rate=0)
    with pytest.raises(ValidationError):
        GuardSettings(alphaa=0.1)  # type: ignore[call-arg]


def test_the_ci_minimum_is_the_analysis_settings_one_default() -> None:
    """One minimum for every CI: the guard's default is `analysis.min_ci_groups`' (the guard
    reads it from the analysis settings rather than copying its number)."""
    from judgelab.config import AnalysisSettings

    assert GuardSettings().min_ci_groups == AnalysisSettings().min_ci_groups == 15


def test_groups_are_chosen_before_their_verdicts_within_the_budget() -> None:
    settings = GuardSettings(sample_rate=0.5, max_groups_per_step=3, seed=7)
    rng = np.random.default_rng(0)
    runs = []
    for flip in (False, True):
        guard, asked = Guard(settings), []
        for step in range(20):
            prompts = [f"task-{g}" for g in range(10) for _ in range(4)]
            rewards = np.round(np.random.default_rng(step).random(40), 1).tolist()
            truth = rng.random(40) < 0.5

            def verdict(
                i: int,
                truth: np.ndarray = truth,
                step: int = step,
                flip: bool = flip,
                asked: list = asked,
            ) -> bool:
                asked.append((step, i))
                return bool(truth[i]) != flip

            guard.observe(prompts, ["c"] * 40, rewards, verdict, step=step)
            assert len([a for a in asked if a[0] == step]) <= 3 * 4  # the cost bound
        runs.append(asked)
    assert runs[0] == runs[1]  # the verdicts changed, the choice did not
    per_step = len(runs[0]) / 4 / 20
    assert 2 <= per_step <= 3  # rate 0.5 of 10 groups, capped at 3


def test_aligned_and_anti_judges() -> None:
    good, bad = Guard(), Guard()
    passed = [True, False, True, False]
    for _step in range(8):
        good.observe(["p"] * 4, ["c"] * 4, [1, 0, 1, 0], passed)
        bad.observe(["p"] * 4, ["c"] * 4, [0, 1, 0, 1], passed)
    assert good.status().alignment == pytest.approx(1.0) and not good.fired
    s = bad.status()
    assert s.alignment == pytest.approx(-1.0) and s.fired
    # each group's e-value is the hand-computed one above (t = 0.5); the detector after n
    # groups is the mean over lambda of sum_j w_j e^(n - j + 1) (w = 0.9, 0.1/2, 0.1/6, ...)
    # plus 0.1 / n: first >= 20 at n = 3 (step 2)
    one = np.array([math.exp(0.5 * lam) / ((math.exp(-0.5 * lam) + 4 + math.exp(0.5 * lam)) / 6)
                    for lam in al.LAMBDAS])  # fmt: skip
    two = (0.9 * one**2 + 0.05 * one).mean() + 0.05
    three = (0.9 * one**3 + 0.05 * one**2 + one / 60).mean() + 0.1 / 3
    assert two < 20 <= three
    assert s.fired_at_step == 2 and s.evalue == pytest.approx(
        (0.9 * one**8 + sum(0.1 / ((j - 1) * j) * one ** (9 - j) for j in range(2, 9))).mean()
        + 0.1 / 8
    )


def test_power_against_alignments_own_simulation() -> None:
    """At 10 epochs x 1 group of 4, the guard's vectorised power simulation and alignment's
    per-group one (`simulate_false_alarms`) measure the same alarm: rates agree within 4 SE."""
    ours_anti, _ = alarm_rate(10, 1, 4, 0.05, 0.4, runs=2000, seed=5)
    theirs_anti = al.simulate_false_alarms(300, 10, 1, 4, 0.05, 0.1, judge="anti", seed=6)
    se = math.sqrt(0.89 * 0.11 * (1 / 2000 + 1 / 300))
    assert abs(ours_anti - theirs_anti["alarm_rate"]) < 4 * se
    ours_blind, _ = alarm_rate(10, 1, 4, 0.05, 0.0, runs=2000, seed=5)
    assert ours_blind <= 0.05


def test_power_statement() -> None:
    short = design_power(2, 1, 4, alpha=0.05, runs=200)
    assert not short.can_fire and "could not fire" in short.statement()
    longer = design_power(10, 2, 4, alpha=0.05, runs=200)
    assert longer.can_fire and longer.detectable_alignment is not None
    assert -1 < longer.detectable_alignment < 0 and "n = 200 simulated runs" in longer.statement()
    # at the stated judge weight the alarm's rate is at least 80 %, by construction; a run
    # five times as long detects a weaker judge
    assert alarm_rate(10, 2, 4, 0.05, longer.weight, runs=200)[0] >= 0.8  # type: ignore[arg-type]
    assert design_power(50, 2, 4, alpha=0.05).detectable_alignment > longer.detectable_alignment
    guard = Guard(GuardSettings(planned_steps=10))
    guard.observe(["a"] * 4 + ["b"] * 4, ["c"] * 8, [0, 1, 0, 1, 1, 0, 0.5, 0], [1, 0] * 4)
    assert guard.status().power == longer  # 2 checked groups of 4 per step, 10 steps


def test_a_blind_judge_rarely_sets_the_guard_off() -> None:
    """The false-alarm rate through the guard's own logic (sampling, grouping, unscored
    rewards): 300 runs of 10 steps x 4 groups of 4, half checked, a judge blind to the tests;
    Ville's bound is alpha = 0.05. The same runs with a judge favouring failing code fire."""
    settings = GuardSettings(sample_rate=0.5, alpha=0.05)
    rng = np.random.default_rng(11)
    fired = {"blind": 0, "anti": 0}
    for judge, runs in (("blind", 300), ("anti", 40)):
        for run in range(runs):
            guard = Guard(settings.model_copy(update={"seed": run}))
            for step in range(10):
                prompts = [f"t{g}" for g in range(4) for _ in range(4)]
                passed = rng.random(16) < rng.beta(1.1, 1.1, 4).repeat(4)
                noise = rng.random(16)
                raw = noise if judge == "blind" else 0.6 * noise + 0.4 * (1 - passed)
                rewards = [None if u < 0.05 else round(float(r), 1) for u, r in
                           zip(rng.random(16), raw, strict=True)]  # fmt: skip
                guard.observe(prompts, ["c"] * 16, rewards, passed.tolist(), step=step)
            fired[judge] += guard.fired
    assert fired["blind"] / 300 <= 0.05
    assert fired["anti"] / 40 >= 0.5


def test_the_guard_imports_no_training_stack() -> None:
    """A slim install (no torch) can import the guard and its adapters' modules."""
    import json
    import subprocess
    import sys

    script = (
        "import json, sys\n"
        "import judgelab.guard, judgelab.guard.trl, judgelab.guard.art, judgelab.guard.truth\n"
        "print(json.dumps(sorted(m for m in ('torch', 'transformers', 'trl', 'art', 'flows')"
        " if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def _batch(rng: np.random.Generator, step: int, k: int, sign: int) -> tuple:
    """Two groups of `k`: 0.6 noise + 0.4 passed (sign +1) or + 0.4 (1 - passed) (sign -1)."""
    passed = rng.random((2, k)) < rng.uniform(0.2, 0.8, (2, 1))
    rewards = 0.6 * rng.random((2, k)) + 0.4 * (passed if sign > 0 else ~passed)
    prompts = [f"{step}-{g}" for g in range(2) for _ in range(k)]
    return prompts, ["c"] * 2 * k, rewards.ravel().tolist(), passed.ravel().tolist()


def test_state_saved_and_loaded_continues_exactly() -> None:
    """save -> JSON -> load -> continue equals the uninterrupted run: the detector, the
    alignment and its CI, the counts, the firing step, and the Monte Carlo draws of groups
    larger than `alignment.EXACT_MAX` (groups of 9 here), with unscored rewards."""
    settings = GuardSettings(sample_rate=0.7, max_groups_per_step=1, seed=3)
    whole, first = Guard(settings), Guard(settings)
    batches = []
    rng = np.random.default_rng(5)
    for step in range(60):
        prompts, completions, rewards, passed = _batch(rng, step, 9, 1 if step < 30 else -1)
        rewards[step % 18] = None
        batches.append((prompts, completions, rewards, passed))
    for step, b in enumerate(batches):
        whole.observe(*b, step=step)
        if step < 25:
            first.observe(*b, step=step)
    resumed = Guard(settings.model_copy(update={"planned_steps": 60}))  # power: free to change
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    for step, b in enumerate(batches[25:], start=25):
        resumed.observe(*b, step=step)
    assert resumed.state_dict() == whole.state_dict()
    a, b = resumed.status(), whole.status()
    assert (a.evalue, a.fired_at_step, a.alignment_ci, a.untested_samples) == (
        b.evalue,
        b.fired_at_step,
        b.alignment_ci,
        b.untested_samples,
    )
    assert b.fired and b.fired_at_step >= 30  # the onset at step 30 was caught
    with pytest.raises(ValueError, match="other settings: alpha, seed"):
        Guard(settings.model_copy(update={"alpha": 0.01, "seed": 4})).load_state_dict(
            whole.state_dict()
        )


def test_a_batch_that_cannot_be_grouped_names_the_step_and_the_group() -> None:
    guard = Guard()
    with pytest.raises(ValueError, match=r"step 7: a batch of 6 .* group 1 \(completions 4..5\)"):
        guard.observe(["a"] * 6, ["c"] * 6, [0.1] * 6, [True] * 6, step=7, group_size=4)
    with pytest.raises(ValueError, match=r"step 3: group 1 \(completions 2..3\) mixes prompts"):
        guard.observe(["a", "a", "b", "c"], ["c"] * 4, [0.1] * 4, None, step=3, group_size=2)
    with pytest.raises(ValueError, match="3 verdicts for 4 completions"):
        guard.observe(["a"] * 4, ["c"] * 4, [0.1] * 4, [True] * 3)


def test_the_guard_catches_an_onset_after_aligned_groups() -> None:
    """A smaller run of bench/guard_onset.py through `Guard.observe`: 200 aligned groups, then
    hacking (issue 64's judge): caught within 100 groups in each of 6 seeded runs, never
    before the onset."""
    for run in range(6):
        rng, guard = np.random.default_rng([64, run]), Guard()
        for step in range(150):
            guard.observe(*_batch(rng, step, 4, 1 if step < 100 else -1), step=step)
        assert guard.fired and 100 <= guard.status().fired_at_step < 150, run
