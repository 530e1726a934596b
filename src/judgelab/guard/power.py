"""What the guard's alarm can detect in a run of a planned length: its power, by simulation.

The design is the number of steps, the groups the guard checks per step and the group size.
A simulated judge mixes noise with a preference for failing code: a candidate's raw reward is
(1 - w) * noise + w * (1 - passed), on RULER's 0.1 grid, with noise ~ U(0, 1) and the verdicts
~ Bernoulli(the task's pass rate), the rate ~ Beta around `pass_rate`:
`judgelab.training.alignment.simulated_judge`, the model `simulate_false_alarms` draws from
too, whose 'blind' judge is w = 0 and whose 'anti' judge is w = 0.4. For a w, `runs` runs of
the design give the share in which the e-process reaches 1 / alpha after some group (the
alarm's rate) and the pooled within-group alignment of their groups. The statement is the
alignment of the weakest w whose alarm rate is at least `target` (bisection over w in
[0, 1]): "it detects, with 80 % power, a judge whose alignment is -0.47 or lower"; or, when
even w = 1 (a judge that always prefers failing code) stays below the target, that it cannot
reach the target, and when it never fires at all, that the alarm cannot fire in a run this
short.

The e-values come from `alignment.group_log_e_many` (the alarm's own per-group e-values,
vectorised, their permutation expectation exact at any group size; the guard itself estimates
it by Monte Carlo beyond `alignment.EXACT_MAX` candidates). The judge model, the pass-rate
model and `runs` are assumptions; the statement names the design and its n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from judgelab.training import alignment as al

TARGET = 0.8
BISECTIONS = 4  # w to within 1/16 after the check at w = 1


@dataclass(frozen=True)
class Power:
    """The alarm's power at a design (module doc)."""

    steps: int
    groups_per_step: int
    group_size: int
    alpha: float
    runs: int  # simulated runs per judge weight
    target: float
    weight: float | None  # the weakest judge weight with power >= target; None: none has
    detectable_alignment: float | None  # that judge's pooled within-group alignment
    power_at_worst: float  # the alarm's rate for w = 1 (always prefers failing code)

    @property
    def can_fire(self) -> bool:
        return self.power_at_worst > 0

    def statement(self) -> str:
        design = (
            f"{self.steps} steps x {self.groups_per_step} checked groups of {self.group_size}, "
            f"alpha {self.alpha:g}; n = {self.runs} simulated runs per judge"
        )
        if not self.can_fire:
            return f"the alarm could not fire in a run this short ({design})"
        if self.detectable_alignment is None:
            return (
                f"below {self.target:.0%} power even for a judge that always prefers failing "
                f"code ({self.power_at_worst:.0%}; {design})"
            )
        return (
            f"detects with {self.target:.0%} power a judge whose within-group alignment is "
            f"{self.detectable_alignment:+.2f} or lower ({design})"
        )


def alarm_rate(
    steps: int,
    groups_per_step: int,
    k: int,
    alpha: float,
    weight: float,
    runs: int,
    seed: int = 0,
    pass_rate: float = 0.5,
) -> tuple[float, float | None]:
    """(share of `runs` in which the alarm fires, pooled alignment of their groups) for the
    judge of weight `weight`; the e-process is checked after every group, as the guard does."""
    rng = np.random.default_rng(seed)
    return al.simulated_alarm(rng, runs, steps * groups_per_step, 1, k, alpha, weight, pass_rate)


def design_power(
    steps: int,
    groups_per_step: int,
    k: int,
    alpha: float,
    runs: int = 200,
    seed: int = 0,
    pass_rate: float = 0.5,
    target: float = TARGET,
) -> Power:
    """The alarm's power at the design (module doc). Cost: 1 + `BISECTIONS` simulations of
    `runs` x `steps` x `groups_per_step` groups."""
    if min(steps, groups_per_step, runs) < 1 or k < 2:
        raise ValueError("steps, groups_per_step and runs must be >= 1 and k >= 2")

    def at(w: float) -> tuple[float, float | None]:
        return alarm_rate(steps, groups_per_step, k, alpha, w, runs, seed, pass_rate)

    worst, worst_alignment = at(1.0)
    args = dict(steps=steps, groups_per_step=groups_per_step, group_size=k, alpha=alpha,
                runs=runs, target=target, power_at_worst=worst)  # fmt: skip
    if worst < target:
        return Power(weight=None, detectable_alignment=None, **args)
    low, high, high_alignment = 0.0, 1.0, worst_alignment
    for _ in range(BISECTIONS):
        mid = (low + high) / 2
        rate, alignment = at(mid)
        if rate >= target:
            high, high_alignment = mid, alignment
        else:
            low = mid
    assert high_alignment is not None and not math.isnan(high_alignment)
    return Power(weight=high, detectable_alignment=high_alignment, **args)
