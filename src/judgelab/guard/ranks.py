"""One guard for a run spread over several processes (ranks): each rank's slice of a batch is
gathered, the whole batch is checked and cut into groups, and one rank's decision reaches all.

Under accelerate (or torchrun) a trainer hands each process its own slice of the generation
batch: TRL lays the whole batch out rank after rank, each prompt's `num_generations`
completions in a row, so a group can straddle two ranks (a slice of 6 with groups of 4). The
guard's groups are therefore formed after the gather, from the rows of every rank in rank order:

    slices = ranks.gather(Slice(rank, step, prompts, keys, texts, rewards))
    batch = join(slices, group_size)   # the same on every rank, or the same error on every rank
    decision = ranks.broadcast(decision_on_rank_0)

`join` refuses a batch whose groups cannot be formed, naming the step, the rank and the group
(rows of the whole batch, and the rank's own rows): a reward list of the wrong length, a batch
that is not a whole number of groups, a group that mixes prompts. Every rank raises the same
error, so none is left waiting in a collective.

`ranks()` is `Local` (one process) unless torch.distributed is initialised with more than one
process; then `TorchRanks` gathers pickled objects over a gloo group (the default group when
it is gloo, else a gloo group made for the guard, so no object is sent through NCCL).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class Ranks(Protocol):
    """The processes of a run, as the guard uses them."""

    rank: int
    size: int

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank."""
        ...

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank (the others' argument is ignored)."""
        ...


class Local:
    """A single process."""

    rank = 0
    size = 1

    def gather(self, obj: Any) -> list[Any]:
        return [obj]

    def broadcast(self, obj: Any) -> Any:
        return obj


class TorchRanks:
    """torch.distributed's processes, objects sent over gloo (module doc). Make it at the same
    point on every rank: making the gloo group is itself a collective."""

    def __init__(self) -> None:
        import torch.distributed as dist

        self._dist = dist
        self.rank = dist.get_rank()
        self.size = dist.get_world_size()
        self._group = None if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")

    def gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.size
        self._dist.all_gather_object(out, obj, group=self._group)
        return out

    def broadcast(self, obj: Any) -> Any:
        box = [obj]
        self._dist.broadcast_object_list(box, src=0, group=self._group)
        return box[0]


def ranks() -> Ranks:
    """`TorchRanks` when torch.distributed runs more than one process, else `Local`. Imports
    torch only when it is already imported (a run without torch is one process)."""
    import sys

    if "torch" not in sys.modules:
        return Local()
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return TorchRanks()
    return Local()


@dataclass(frozen=True)
class Slice:
    """One rank's part of a batch: its rows' prompts, verdict keys and completion texts, and
    each reward function's rewards for them (None: unscored)."""

    rank: int
    step: int
    prompts: list[Any]
    keys: list[Any]
    texts: list[str]
    rewards: dict[str, list[float | None]]
    error: str | None = None  # what went wrong on this rank before the gather


@dataclass(frozen=True)
class Batch:
    """The whole batch, rank after rank; `origin[i]` is row i's (rank, row within its slice)."""

    step: int
    prompts: list[Any]
    keys: list[Any]
    texts: list[str]
    rewards: dict[str, list[float | None]]
    origin: list[tuple[int, int]]

    def where(self, rows: range) -> str:
        """Rows of the whole batch and the ranks' own rows they came from, for an error."""
        parts: dict[int, list[int]] = {}
        for i in rows:
            if i < len(self.origin):
                rank, row = self.origin[i]
                parts.setdefault(rank, []).append(row)
        local = ", ".join(f"rank {r} rows {min(v)}..{max(v)}" for r, v in parts.items())
        return f"rows {rows.start}..{rows.stop - 1}: {local}"


def _check_slice(s: Slice, step: int) -> None:
    if s.error is not None:
        raise ValueError(f"step {s.step}, rank {s.rank}: {s.error}")
    if s.step != step:
        raise ValueError(f"the ranks disagree on the step: rank 0 is at {step}, rank {s.rank} "
                         f"at {s.step}")  # fmt: skip
    n = len(s.texts)
    if not len(s.prompts) == len(s.keys) == n:
        raise ValueError(f"step {step}, rank {s.rank}: {len(s.prompts)} prompts, "
                         f"{len(s.keys)} keys, {n} completions")  # fmt: skip
    for name, values in s.rewards.items():
        if len(values) != n:
            raise ValueError(f"step {step}, rank {s.rank}: reward function {name!r} gave "
                             f"{len(values)} rewards for {n} completions")  # fmt: skip


def join(slices: Sequence[Slice], group_size: int) -> Batch:
    """The ranks' slices as one batch cut into groups of `group_size` (module doc); the same
    on every rank, or a ValueError naming the step, the rank and the group."""
    if group_size < 1:
        raise ValueError(f"group size {group_size}: the trainer's num_generations is at least 1")
    step = slices[0].step
    names = list(slices[0].rewards)
    for s in slices:
        _check_slice(s, step)
        if list(s.rewards) != names:
            raise ValueError(f"step {step}, rank {s.rank}: reward functions {list(s.rewards)}, "
                             f"rank {slices[0].rank} has {names}")  # fmt: skip
    batch = Batch(
        step=step,
        prompts=[p for s in slices for p in s.prompts],
        keys=[k for s in slices for k in s.keys],
        texts=[t for s in slices for t in s.texts],
        rewards={name: [r for s in slices for r in s.rewards[name]] for name in names},
        origin=[(s.rank, i) for s in slices for i in range(len(s.texts))],
    )
    n = len(batch.texts)
    sizes = ", ".join(f"rank {s.rank}: {len(s.texts)}" for s in slices)
    if n % group_size:
        last = range(n - n % group_size, n - n % group_size + group_size)
        raise ValueError(
            f"step {step}: {n} completions ({sizes}) are not a whole number of groups of "
            f"{group_size} (num_generations); group {n // group_size} "
            f"({batch.where(last)}) is short of {group_size - n % group_size}"
        )
    for g, start in enumerate(range(0, n, group_size)):
        rows = range(start, start + group_size)
        if any(batch.prompts[i] != batch.prompts[start] for i in rows):
            raise ValueError(f"step {step}: group {g} ({batch.where(rows)}) mixes prompts: is "
                             f"num_generations {group_size} the trainer's?")  # fmt: skip
    return batch
