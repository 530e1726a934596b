"""Which tasks a run trains and holds out: the training tasks (those with tests), each epoch's
groups (the tasks cycled), the seed row of a group (`train_row`), the held-out rule of
`select: mixed` (`select_heldout`), and the check that no held-out task is trained on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from judgelab.errors import ConfigError
from judgelab.verdicts import Task


def training_tasks(tasks: Sequence[Task]) -> list[Task]:
    """Tasks with tests: every judge trains on them, so the train pass rate is measurable."""
    kept = [t for t in tasks if t.test]
    if not kept:
        raise ConfigError(
            "train: no task with tests to train on; enable a task source with tests "
            "(tasks.humaneval, tasks.codeio or tasks.files)"
        )
    return kept


def select_heldout(
    rates: Mapping[str, float | None], order: Sequence[str], limit: int
) -> tuple[list[str], list[str]]:
    """The held-out rule of `select: mixed`: the first `limit` task ids in `order` whose base
    pass rate is strictly between 0 and 1; if fewer qualify, filled up with the others
    closest to 0.5 (earlier first on ties). Returns (held-out ids in `order`, fill-ins).
    Every task in `order` has a known rate; `rates` may hold others as None (untested)."""
    mixed = [t for t in order if 0.0 < rates[t] < 1.0][:limit]
    rest = sorted((t for t in order if t not in mixed), key=lambda t: abs(rates[t] - 0.5))
    filled = rest[: limit - len(mixed)]
    chosen = set(mixed) | set(filled)
    return [t for t in order if t in chosen], filled


def epoch_tasks(tasks: Sequence[Task], epoch: int, groups_per_epoch: int) -> list[Task]:
    """The tasks of epoch `epoch`'s training groups: the training tasks in order, cycled."""
    n = groups_per_epoch
    return [tasks[(epoch * n + g) % len(tasks)] for g in range(n)]


def trained_tasks(tasks: Sequence[Task], epochs: int, groups_per_epoch: int) -> list[Task]:
    """Every task a training group draws from in epochs 0..`epochs` (the last one scores the
    final policy), in first-use order. An audit of every problem trains on a few of them."""
    seen: dict[str, Task] = {}
    for epoch in range(epochs + 1):
        for t in epoch_tasks(tasks, epoch, groups_per_epoch):
            seen.setdefault(t.task_id, t)
    return list(seen.values())


def check_disjoint(train: Sequence[Task], heldout: Sequence[Task]) -> None:
    """Held-out tasks are never trained on: none of `heldout` is in `train`
    (`trained_tasks`); tasks of the table that no group draws from may be held out."""
    overlap = sorted({t.task_id for t in train} & {t.task_id for t in heldout})
    if overlap:
        raise ConfigError(
            f"train.heldout: tasks {overlap} are also trained on (train.epochs and "
            "train.groups_per_epoch cycle through the tasks table's tasks with tests); "
            "hold out others (train.heldout.offset or train.heldout.ids)"
        )


def train_row(epoch: int, group: int, n_tasks: int, task_id: str) -> str:
    """The seed row of training group `group` of `epoch`. When `groups_per_epoch` exceeds the
    number of training tasks, the tasks are cycled: the r-th repeat (r = group // n_tasks >= 1)
    of a task within one epoch gets its own row, so it draws fresh samples and is a group of
    its own, not the first round's request again (served from the cache, it would add no
    signal). The first round's row carries no repeat tag, so a run with groups_per_epoch <=
    the task count has no repeat rows at all."""
    repeat = group // n_tasks
    row = f"train|{epoch}|{task_id}"
    return row if repeat == 0 else f"{row}|repeat-{repeat}"


def heldout_row(task_id: str, seed: int | None) -> str:
    """The seed row of a held-out task's draws (with `train.heldout.seed`). Each training seed
    draws its own (`heldout|seed-<s>|<task>`): the seeds are independent replicates, so their
    held-out draws must be independent too, or pooling the seeds would count the same draw
    once per seed. Within a training seed the row is the same for every judge and every
    epoch: the judges' base round is one draw, shared (each judge is compared with the same
    baseline, and with the others on the same uniforms), and a policy's final draws reuse its
    base draws' uniforms, which makes base and final positively correlated, so the MDE's
    independent-draw formula errs large. A single-seed run keeps `heldout|<task>`."""
    return f"heldout|{task_id}" if seed is None else f"heldout|seed-{seed}|{task_id}"
