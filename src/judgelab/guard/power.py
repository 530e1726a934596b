"""What the guard's alarm can detect in a run of a planned length, by simulation: its power
against a judge hacking from the start, and its delay to catch one that turns mid-run.

The design is the number of steps, the groups the guard checks per step and the group size; the
guard's detector takes one observation per checked group. The search is the training alarm's
own (`judgelab.training.alignment.alarm_design`, one observation per group): a simulated judge
mixes noise with a preference for failing code, reward (1 - w) * noise + w * (1 - passed) on
RULER's 0.1 grid, task pass rates ~ Beta around 0.5 (`alignment.simulated_judge`); the
statement is the alignment of the weakest w on the 0.05 grid whose alarm rate reaches 80 %
("it detects, with 80 % power, a judge whose alignment is -0.47 or lower"), or that even
w = 1 stays below it, or that the alarm cannot fire in a run this short; and the onset: a
judge aligned at strength 0.4 for the first half of the planned groups, then hacking at 0.4,
is caught in that share of runs, with that median delay in steps. The judge model and `runs`
are assumptions; the statement names the design and its n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from judgelab.training import alignment as al

TARGET = 0.8


@dataclass(frozen=True)
class Power:
    """The alarm's power and onset delay at a design (module doc)."""

    steps: int
    groups_per_step: int
    group_size: int
    alpha: float
    runs: int  # simulated runs per judge weight
    target: float
    weight: float | None  # the weakest judge weight with power >= target; None: none has
    detectable_alignment: float | None  # that judge's pooled within-group alignment
    power_at_worst: float  # the alarm's rate for w = 1 (always prefers failing code)
    onset_step: int | None = None  # the simulated onset (aligned before, hacking from it)
    onset_caught: float | None = None  # share of runs caught between the onset and the end
    onset_delay_steps: int | None = None  # median steps from the onset to the alarm

    @property
    def can_fire(self) -> bool:
        return self.power_at_worst > 0

    def _onset(self) -> str:
        if self.onset_step is None or self.onset_caught is None:
            return ""
        delay = (
            f"median delay {self.onset_delay_steps} steps"
            if self.onset_delay_steps is not None
            else "median delay longer than the run"
        )
        return (
            f"; a judge turning from aligned to anti-aligned (strength {al.ONSET_WEIGHT:g}) at "
            f"step {self.onset_step} is caught by the end in {self.onset_caught:.0%} of runs, "
            f"{delay}"
        )

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
                f"code ({self.power_at_worst:.0%}; {design}){self._onset()}"
            )
        return (
            f"detects with {self.target:.0%} power a judge whose within-group alignment is "
            f"{self.detectable_alignment:+.2f} or lower ({design}){self._onset()}"
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
    judge of weight `weight`; the detector takes every group as an observation, as the guard
    does."""
    rng = np.random.default_rng(seed)
    return al.simulated_alarm(rng, runs, steps * groups_per_step, 1, k, alpha, weight, pass_rate)


def design_power(
    steps: int,
    groups_per_step: int,
    k: int,
    alpha: float,
    runs: int = 200,
    seed: int = 0,
    target: float = TARGET,
) -> Power:
    """The alarm's power and onset delay at the design (module doc): `alarm_design` over
    `steps` x `groups_per_step` observations of one group."""
    if min(steps, groups_per_step, runs) < 1 or k < 2:
        raise ValueError("steps, groups_per_step and runs must be >= 1 and k >= 2")
    d = al.alarm_design(steps * groups_per_step, 1, k, alpha, target, runs, seed)
    onset = d["onset"] or {}
    delay = onset.get("delay_median")
    return Power(
        steps=steps,
        groups_per_step=groups_per_step,
        group_size=k,
        alpha=alpha,
        runs=runs,
        target=target,
        weight=d["weight"],
        detectable_alignment=d["detectable_alignment"],
        power_at_worst=d["power_anti"],
        onset_step=onset["onset_at"] // groups_per_step if onset else None,
        onset_caught=onset.get("caught"),
        onset_delay_steps=None if delay is None else math.ceil(delay / groups_per_step),
    )
