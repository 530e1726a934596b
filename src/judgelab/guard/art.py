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

`ArtGuard` adds what TRL's adapter does on alarm, as far as ART's loop allows: it keeps the
record (`judgelab.guard.record`: the alarm's step, the last safe step) and logs the alarm and
the last safe step, to the log and to the active MLflow run, when it fires; `save(folder)` /
`restore(folder)` keep the guard's state beside ART's checkpoints (a resumed run continues the
e-process). ART trains only when the loop calls `model.train(groups)` and keeps a checkpoint of
every step it trains, so the loop that stops on `status.fired` has not trained on the step
that raised the alarm, and the checkpoint of the last safe step is ART's own; ART offers no
call to force a save, so the hook cannot save one itself.

    watch = ArtGuard(guard, verdict)        # watch.restore(folder) on a resumed run
    for step in range(start, steps):
        groups = await art.gather_trajectory_groups(...)
        if watch.observe(groups, step).fired:
            break                           # watch.record.last_safe_step: where to go back
        await model.train(groups)
        watch.save(folder)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judgelab.guard import record as rec
from judgelab.guard.core import Guard, GuardStatus

log = logging.getLogger(__name__)

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
        if not group.trajectories:  # every rollout of it failed: no group to observe
            log.warning("step %s: ART group %d has no trajectories; the guard skips it",
                        step, index)  # fmt: skip
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


class ArtGuard:
    """The guard in ART's loop with its record, alarm log and state file (module doc)."""

    def __init__(
        self, guard: Guard, verdict: Callable[[Trajectory], bool | None] | None = None
    ) -> None:
        self.guard = guard
        self.verdict = verdict
        self.record = rec.Record(reward="the trajectories' reward (ART's, as the loop set it)")

    def observe(self, groups: Iterable[TrajectoryGroup], step: int) -> GuardStatus:
        """One step's groups, before `model.train(groups)`; logs the alarm when it is new."""
        status = observe_groups(self.guard, groups, self.verdict, step=step)
        if self.record.update(status, step):
            rec.log_alarm(self.record, step)
        return status

    def save(self, folder: str | Path) -> Path:
        """The guard's state and the record into `folder` (beside ART's checkpoints)."""
        Path(folder).mkdir(parents=True, exist_ok=True)
        return rec.save(folder, self.guard, self.record)

    def restore(self, folder: str | Path) -> None:
        """Continue from `save(folder)`; FileNotFoundError naming the path when absent."""
        self.record = rec.load(rec.read(folder), self.guard)
