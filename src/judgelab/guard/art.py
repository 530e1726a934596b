"""The guard in ART's training loop: hand it each step's `TrajectoryGroup`s after gathering
them and before `model.train(groups)`.

    status = observe_groups(guard, groups, verdict, step=step)
    if status.fired:
        break  # or keep training and flag the run

A group's prompt is its first trajectory's messages before the last one (the completion); the
completion is the last message's content; the reward is the trajectory's `reward` (ART's
rewards are never None). `verdict(trajectory)` gives the tests' verdict for one trajectory
(True / False, None when the tests could not run); it is called only for the checked groups'
trajectories. Reads ART's objects by their attributes; imports nothing of ART.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from judgelab.guard.core import Guard, GuardStatus

if TYPE_CHECKING:
    from art import Trajectory, TrajectoryGroup


def _prompt(trajectory: Trajectory) -> str:
    messages = trajectory.messages()
    return json.dumps(messages[:-1], sort_keys=True, default=str)


def _completion(trajectory: Trajectory) -> str:
    messages = trajectory.messages()
    return str(messages[-1].get("content") or "") if messages else ""


def observe_groups(
    guard: Guard,
    groups: Iterable[TrajectoryGroup],
    verdict: Callable[[Trajectory], bool | None] | None = None,
    *,
    step: int | None = None,
) -> GuardStatus:
    """One ART step's groups to the guard (module doc)."""
    trajectories: list[Any] = []
    keys: list[str] = []
    for index, group in enumerate(groups):
        if not group.trajectories:
            continue
        # the group's index in its key: two groups of one prompt stay two groups
        key = f"{index}|{_prompt(group.trajectories[0])}"
        trajectories += group.trajectories
        keys += [key] * len(group.trajectories)
    completions = [_completion(t) for t in trajectories]
    guard.observe(
        keys,
        completions,
        [float(t.reward) for t in trajectories],
        None if verdict is None else (lambda i: verdict(trajectories[i])),
        step=step,
    )
    return guard.status()
