"""A reward guard for a live GRPO run: the judge's rewards, group by group, against the tests.

A trainer (TRL's `GRPOTrainer`, ART, verl, a loop of your own) hands the guard each batch as it
sees it: the prompts, the completions and the judge's rewards, k completions of a prompt in a
row (a group), and, where the task has tests, a way to get the tests' verdicts. The guard
tracks, over the run:

- **flat groups**: groups whose scored rewards have no spread (GRPO learns nothing from them);
- the judge's **unscored rate**: rewards of None (the judge could not score), which leave
  their group's statistics as they leave GRPO's;
- **within-group alignment** with the tests (`judgelab.training.alignment`): 2 * sum A_i *
  passed_i / sum |A_i| over the checked groups, A_i GRPO's advantage (ART's definition; the
  trainer's own scaling does not change a group's e-value), with its cluster-bootstrap CI from
  `min_ci_groups` groups up;
- **the alarm**: the e-detector of `judgelab.training.alarm`, fed one observation per checked
  group (per lambda, exp(lambda t) / E_perm[exp(lambda t)] of the group's anti-alignment t): a
  mixture over the group at which the judge turned to paying for failing code, the first
  group included at weight `alarm.FROM_START`. Under a judge blind to the tests it is a test
  martingale, so by Ville's inequality it reaches 1 / alpha at any point of a run, however
  long and however often it is looked at, with probability at most alpha; a judge that
  hacks only after many aligned groups is still caught (the aligned groups do not lower the
  terms that start after them). Once raised it stays raised.

**Which groups are checked** is decided before any verdict is known, from what the judge
already gave: among the groups with reward spread (a flat group's e-value is 1 whatever the
tests say), a group is checked when a hash of (seed, step, its place in the batch, its prompt)
falls below `sample_rate`, at most `max_groups_per_step` per step (smallest hashes first). The
choice depends on nothing the tests say, so the e-process stays valid, and the verdicts are
asked for the checked groups' completions only: the tests' cost is bounded by
`max_groups_per_step` x the group size per step.

**Power** (`judgelab.guard.power`): with `planned_steps` set, the status states what the alarm
can detect at the run's length, from the design the guard sees (checked groups per step, group
size), by simulation: its power from the start and its delay after a mid-run onset.

**State**: `state_dict()` (JSON-serialisable) and `load_state_dict()` carry everything the
guard has gathered, so a run resumed from a checkpoint continues the same detector.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from judgelab.advantage import group_advantages, has_spread
from judgelab.config.analysis import AnalysisSettings
from judgelab.guard.power import Power, design_power
from judgelab.training import alignment as al
from judgelab.training.alarm import DEFAULT_ALPHA, Detector

log = logging.getLogger(__name__)

Verdict = bool | float | None  # passed, failed, or None: the tests could not run
# verdicts for a batch: one per completion, or a function of a completion's index in the
# batch, called only for the completions of the checked groups
Verdicts = Sequence[Verdict] | Callable[[int], Verdict]


class GuardSettings(BaseModel):
    """How the guard samples, when it fires, and what it states."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alpha: float = Field(
        DEFAULT_ALPHA, gt=0, lt=1, description="The alarm fires when its detector reaches "
        "1 / alpha; a judge blind to the tests sets it off with probability at most alpha in a "
        "whole run. Default: train.alarm_alpha's (the pipeline's runs use that setting, the "
        "same alarm)."
    )  # fmt: skip
    sample_rate: float = Field(
        1.0, gt=0, le=1, description="Share of the groups with reward spread whose tests run."
    )
    max_groups_per_step: int | None = Field(
        None, ge=1, description="At most this many checked groups per step (the tests' cost "
        "bound: this many x the group size sandbox runs per step); None: no cap."
    )  # fmt: skip
    min_ci_groups: int = Field(
        AnalysisSettings.model_fields["min_ci_groups"].default, ge=2, le=1000,
        description="Fewest checked groups the alignment's CI is drawn from "
        "(analysis.min_ci_groups' default: one minimum for every CI)."
    )  # fmt: skip
    planned_steps: int | None = Field(
        None, ge=1, description="The run's planned length in steps, for the power statement; "
        "None: no statement."
    )  # fmt: skip
    power_runs: int = Field(200, ge=20, le=100_000, description="Simulated runs per judge "
                            "weight in the power statement.")  # fmt: skip
    seed: int = Field(0, description="Seeds the sampling hash and Monte Carlo permutations.")


@dataclass(frozen=True)
class GuardStatus:
    """Where the run stands. Every rate carries its n."""

    steps: int  # steps observed
    groups: int  # groups observed
    completions: int
    flat_groups: int  # no reward spread among the scored rewards
    unscored: int  # rewards of None
    checked_groups: int  # sampled, their tests asked for
    informative_groups: int  # checked groups the tests split (and the judge's push is not 0)
    tested_samples: int  # checked completions with a verdict
    untested_samples: int  # checked completions whose tests could not run (verdict None)
    alignment: float | None
    alignment_ci: tuple[float, float] | None  # from `min_ci_groups` checked groups up
    evalue: float
    threshold: float  # 1 / alpha
    fired: bool
    fired_at_step: int | None
    power: Power | None

    @property
    def unscored_rate(self) -> float | None:
        return self.unscored / self.completions if self.completions else None

    @property
    def flat_rate(self) -> float | None:
        return self.flat_groups / self.groups if self.groups else None

    def metrics(self) -> dict[str, float]:
        """Flat numbers for a trainer's logger or MLflow (None left out)."""
        out = {
            "guard/evalue": self.evalue,
            "guard/fired": float(self.fired),
            "guard/groups": float(self.groups),
            "guard/checked_groups": float(self.checked_groups),
            "guard/informative_groups": float(self.informative_groups),
            "guard/flat_rate": self.flat_rate,
            "guard/unscored_rate": self.unscored_rate,
            "guard/alignment": self.alignment,
            "guard/alignment_ci_low": self.alignment_ci[0] if self.alignment_ci else None,
            "guard/alignment_ci_high": self.alignment_ci[1] if self.alignment_ci else None,
        }
        return {k: float(v) for k, v in out.items() if v is not None}

    def summary(self) -> str:
        align = "n/a" if self.alignment is None else f"{self.alignment:+.2f}"
        if self.alignment_ci:
            align += f" [{self.alignment_ci[0]:+.2f}, {self.alignment_ci[1]:+.2f}]"
        state = f"FIRED at step {self.fired_at_step}" if self.fired else "quiet"
        text = (
            f"reward guard {state}: e-value {self.evalue:.3g} (threshold {self.threshold:g}); "
            f"alignment {align} (n = {self.checked_groups} checked groups, "
            f"{self.informative_groups} split by the tests, {self.tested_samples} samples); "
            f"flat groups {self.flat_groups}/{self.groups}; "
            f"unscored {self.unscored}/{self.completions}"
        )
        return text + (f"; power: {self.power.statement()}" if self.power else "")


def split_groups(
    prompts: Sequence[object], group_size: int | None, step: int | None = None
) -> list[range]:
    """The batch's groups as index ranges: runs of `group_size`, or, without it, runs of
    consecutive equal prompts (how TRL and ART lay a batch out). A batch that cannot be cut
    into groups raises, naming the step and the group."""
    n = len(prompts)
    at = "" if step is None else f"step {step}: "
    if group_size is not None:
        if group_size < 1 or n % group_size:
            raise ValueError(
                f"{at}a batch of {n} is not a whole number of groups of {group_size}: group "
                f"{n // max(group_size, 1)} (completions {n - n % max(group_size, 1)}..{n - 1}) "
                "is incomplete"
            )
        for start in range(0, n, group_size):
            block = prompts[start : start + group_size]
            if any(p != block[0] for p in block):
                raise ValueError(
                    f"{at}group {start // group_size} (completions {start}.."
                    f"{start + group_size - 1}) mixes prompts"
                )
        return [range(s, s + group_size) for s in range(0, n, group_size)]
    out, start = [], 0
    for i in range(1, n + 1):
        if i == n or prompts[i] != prompts[start]:
            out.append(range(start, i))
            start = i
    return out


def sample_key(seed: int, step: int, index: int, prompt: object) -> float:
    """A group's place in [0, 1) for the sampling: a hash of what is known before the tests."""
    text = f"{seed}|{step}|{index}|{prompt!r}".encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") / 2**64


def _verdict(value: Verdict) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(bool(value)) if isinstance(value, bool) else float(value)


# the settings a saved state depends on (the power statement's are free to change on resume)
_STATE_SETTINGS = {"alpha", "sample_rate", "max_groups_per_step", "min_ci_groups", "seed"}


class Guard:
    """The reward guard (module doc). Not thread-safe: one trainer feeds it."""

    def __init__(self, settings: GuardSettings | None = None) -> None:
        self.settings = settings or GuardSettings()
        self._rng = np.random.default_rng(self.settings.seed)
        self._detector = Detector(len(al.LAMBDAS))
        self._checked: list[al.GroupAlignment] = []
        self._per_step: Counter[int] = Counter()  # checked groups per step
        self._sizes: Counter[int] = Counter()  # group sizes seen
        self._steps: set[int] = set()
        self._last_step = -1
        self._groups = self._completions = self._flat = self._unscored = 0
        self._untested = 0
        self._fired_at: int | None = None
        self._power: tuple[tuple[int, int, int], Power] | None = None

    @property
    def fired(self) -> bool:
        return self._fired_at is not None

    def state_dict(self) -> dict:
        """Everything the guard has gathered, JSON-serialisable: `load_state_dict` on a guard
        of the same settings resumes it exactly (the detector, the checked groups behind the
        alignment, the counts, the Monte Carlo generator)."""
        return {
            "settings": self.settings.model_dump(include=_STATE_SETTINGS),
            "detector": self._detector.state_dict(),
            "rng": self._rng.bit_generator.state,
            "checked": [[list(g.advantages), list(g.passed)] for g in self._checked],
            "per_step": sorted(self._per_step.items()),
            "sizes": sorted(self._sizes.items()),
            "steps": sorted(self._steps),
            "last_step": self._last_step,
            "counts": [
                self._groups,
                self._completions,
                self._flat,
                self._unscored,
                self._untested,
            ],  # fmt: skip
            "fired_at": self._fired_at,
        }

    def load_state_dict(self, state: dict) -> None:
        """Resume from `state_dict()`'s output; refuses one saved under other settings."""
        mine = self.settings.model_dump(include=_STATE_SETTINGS)
        differ = sorted(k for k in mine if state["settings"].get(k) != mine[k])
        if differ:
            raise ValueError(f"guard state saved with other settings: {', '.join(differ)}")
        self._detector.load_state_dict(state["detector"])
        self._rng.bit_generator.state = state["rng"]
        self._checked = [al.GroupAlignment(tuple(a), tuple(p)) for a, p in state["checked"]]
        self._per_step = Counter({int(k): int(v) for k, v in state["per_step"]})
        self._sizes = Counter({int(k): int(v) for k, v in state["sizes"]})
        self._steps = {int(x) for x in state["steps"]}
        self._last_step = int(state["last_step"])
        counts = [int(c) for c in state["counts"]]
        self._groups, self._completions, self._flat, self._unscored, self._untested = counts
        self._fired_at = state["fired_at"]
        self._power = None

    @property
    def evalue(self) -> float:
        """The alarm's detector (`alarm.Detector`): 1 before any checked group."""
        return self._detector.value

    def observe(
        self,
        prompts: Sequence[object],
        completions: Sequence[object],
        rewards: Sequence[float | None],
        verdicts: Verdicts | None = None,
        *,
        step: int | None = None,
        group_size: int | None = None,
    ) -> bool:
        """One batch as the trainer sees it (module doc). `step`: the trainer's step (default:
        one after the last); `group_size`: k (default: runs of equal prompts). Returns whether
        the alarm has fired (`status()` has the rest)."""
        if not len(prompts) == len(completions) == len(rewards):
            raise ValueError(
                f"{len(prompts)} prompts, {len(completions)} completions, {len(rewards)} rewards"
            )
        if verdicts is not None and not callable(verdicts) and len(verdicts) != len(prompts):
            raise ValueError(f"{len(verdicts)} verdicts for {len(prompts)} completions")
        step = self._last_step + 1 if step is None else step
        self._last_step = max(self._last_step, step)
        self._steps.add(step)
        scored = [None if r is None or math.isnan(r) else float(r) for r in rewards]
        self._completions += len(scored)
        self._unscored += sum(r is None for r in scored)
        spread: list[tuple[float, range]] = []
        for index, group in enumerate(split_groups(prompts, group_size, step)):
            self._groups += 1
            self._sizes[len(group)] += 1
            values = [scored[i] for i in group if scored[i] is not None]
            if not has_spread(values):
                self._flat += 1
                continue
            key = sample_key(self.settings.seed, step, index, prompts[group.start])
            if key < self.settings.sample_rate:
                spread.append((key, group))
        if verdicts is None:
            return self.fired
        room = self.settings.max_groups_per_step
        room = len(spread) if room is None else max(0, room - self._per_step[step])
        for _key, group in sorted(spread, key=lambda kg: kg[0])[:room]:
            self._check(group, scored, verdicts, step)
        return self.fired

    def _check(
        self, group: range, scored: list[float | None], verdicts: Verdicts, step: int
    ) -> None:
        kept = [i for i in group if scored[i] is not None]
        advantages = group_advantages([scored[i] for i in kept])  # type: ignore[misc]
        ask = verdicts if callable(verdicts) else verdicts.__getitem__
        passed = [_verdict(ask(i)) for i in kept]
        self._untested += sum(p is None for p in passed)
        g = al.group_alignment(advantages, passed)
        self._per_step[step] += 1
        self._checked.append(g)
        self._detector.update(al.group_log_e(g, self._rng))
        if self._fired_at is None and self.evalue >= 1 / self.settings.alpha:
            self._fired_at = step
            log.warning("reward guard fired at step %d: %s", step, self.status().summary())

    def power(self) -> Power | None:
        """The power statement at `planned_steps`, from the design seen so far (the mean
        checked groups per step, rounded, and the commonest group size); None before any
        group was checked or without `planned_steps`. Simulated once per design."""
        s = self.settings
        if s.planned_steps is None or not self._per_step or not self._sizes:
            return None
        per_step = max(1, round(sum(self._per_step.values()) / len(self._steps)))
        k = self._sizes.most_common(1)[0][0]
        if k < 2:
            return None
        design = (s.planned_steps, per_step, k)
        if self._power is None or self._power[0] != design:
            self._power = (design, design_power(*design, s.alpha, s.power_runs, s.seed))
        return self._power[1]

    def status(self) -> GuardStatus:
        fig = (
            al.epoch_alignment(self._checked, self.settings.min_ci_groups) if self._checked else {}
        )
        low, high = fig.get("alignment_ci_low"), fig.get("alignment_ci_high")
        return GuardStatus(
            steps=len(self._steps),
            groups=self._groups,
            completions=self._completions,
            flat_groups=self._flat,
            unscored=self._unscored,
            checked_groups=len(self._checked),
            informative_groups=sum(g.informative for g in self._checked),
            tested_samples=sum(len(g.passed) for g in self._checked),
            untested_samples=self._untested,
            alignment=fig.get("alignment"),
            alignment_ci=(low, high) if low is not None and high is not None else None,
            evalue=self.evalue,
            threshold=1 / self.settings.alpha,
            fired=self.fired,
            fired_at_step=self._fired_at,
            power=self.power(),
        )
