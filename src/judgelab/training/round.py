"""One epoch's round of one run: which run (`RewardRun`: a judge in train.rewards and a
training seed), what it drew (`Drawn`), and how each of its groups was scored (`GroupScores`,
`EpochScores`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from judgelab.evaluators.base import Evaluator
from judgelab.scoring import ScoredGroup
from judgelab.training.policy import Sample
from judgelab.training.sampler import Request
from judgelab.verdicts import Candidate, Task


@dataclass(frozen=True)
class RewardRun:
    """One policy's training: its judge's name in train.rewards, the evaluator, its output
    directory and its training seed (None: `train.seed`, the single-seed layout)."""

    name: str
    judge: Evaluator
    out_dir: Path
    seed: int | None = None

    @property
    def key(self) -> str:
        """The run's name among the trainer's runs: the judge's, or `judge/seed-<s>`."""
        return self.name if self.seed is None else f"{self.name}/seed-{self.seed}"


@dataclass(frozen=True)
class Drawn:
    """One judge's round in one epoch: its requests (the training groups, then the held-out
    prompts) and the samples each drew, from the adapter whose content hash is `adapter`."""

    run: RewardRun
    adapter: str
    requests: list[Request]
    groups: list[list[Sample]]


@dataclass(frozen=True)
class GroupScores:
    """One group of a judge's round: its candidates, the judge's rows (None for a held-out
    group, which no judge sees) and the tests' rows."""

    task: Task
    request: Request
    samples: list[Sample]
    candidates: list[Candidate]
    judged: ScoredGroup | None
    tests: ScoredGroup


@dataclass(frozen=True)
class EpochScores:
    """One judge's round, scored: its training groups, then its held-out groups."""

    drawn: Drawn
    train: list[GroupScores]
    heldout: list[GroupScores]
