"""A custom reward function as an evaluator: the `reward` kind.

The function has TRL's reward signature, ``fn(prompts, completions, **kwargs) ->
list[float | None]``, and is called once per task group with keyword arguments:

- ``prompts``: the user turn each candidate answered (the task's request), one per completion;
- ``completions``: the candidates' text, as the policy wrote it;
- ``task_id``, ``candidate_id``, ``entry_point``, ``test``: one per completion, as TRL passes
  a dataset's columns (``entry_point`` and ``test`` are None for a task without tests).

It returns one value per completion: a number is the reward, mapped linearly from
[``min_score``, ``max_score``] onto [0, 1] (outside it: ``out_of_range`` decides, the raw
reward kept in ``raw_score``); None leaves that candidate *unscored*. A reply of the wrong
length, a value that is not a number (a bool included) or is NaN or infinite is a
`RewardFunctionError` naming the evaluator, the task and the place: a broken function is a
bug to fix, not a score. An exception the function raises propagates as it is (the scores
stage's task retries it, then the stage fails).

Where the function comes from (its settings' ``function``): a name given to
`register_reward` in this process, else ``"package.module:function"``, imported when the
evaluator is built, which is what params.yaml and a runner's other processes (Dask) need.
`REWARDS` is the one table of registered names; the function itself is never hashed, so a
changed function under the same name gives the same run id: rename it, or change a setting.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from importlib import import_module
from numbers import Real
from typing import Any

from judgelab.config.evaluators import RewardSettings
from judgelab.errors import ConfigError, JudgelabError
from judgelab.evaluators.base import Evaluator
from judgelab.verdicts import Candidate, Task, Verdict

log = logging.getLogger(__name__)

RewardFunction = Callable[..., Any]

# name -> function, for `function: <name>` in this process (register_reward)
REWARDS: dict[str, RewardFunction] = {}


class RewardFunctionError(JudgelabError):
    """A reward function returned something that is not one reward or None per completion."""


def register_reward(name: str, function: RewardFunction) -> str:
    """Register `function` under `name` for ``{kind: reward, function: <name>}`` in this
    process; returns the name. A name registered again names the new function (a notebook
    cell run again redefines it); the log says so."""
    if not callable(function):
        raise ConfigError(f"register_reward({name!r}): {function!r} is not callable")
    if not name or ":" in name or not all(part.isidentifier() for part in name.split(".")):
        raise ConfigError(
            f"register_reward: {name!r} is not a name (letters, digits, _ and dots; no ':')"
        )
    if REWARDS.get(name, function) is not function:
        log.info("register_reward: %r now names %r", name, function)
    REWARDS[name] = function
    return name


def reward_function(ref: str, where: str) -> RewardFunction:
    """The function `ref` names: a registered name, else ``module:function`` imported now.
    Errors name `where` (the setting) and what is known."""
    if ref in REWARDS:
        return REWARDS[ref]
    module, sep, name = ref.partition(":")
    if not sep:
        known = sorted(REWARDS) or "none"
        raise ConfigError(
            f"{where}: {ref!r} is not a registered reward (registered: {known}) nor "
            "'module:function'"
        )
    try:
        found = getattr(import_module(module), name)
    except ImportError as err:
        raise ConfigError(f"{where}: cannot import module {module!r} ({err})") from None
    except AttributeError:
        raise ConfigError(f"{where}: module {module!r} has no {name!r}") from None
    if not callable(found):
        raise ConfigError(f"{where}: {ref} is not callable")
    return found  # type: ignore[no-any-return]


class RewardEvaluator(Evaluator):
    """Scores a group with a reward function (module docstring)."""

    protocol = RewardSettings.protocol
    spec: RewardSettings

    def __init__(self, spec: RewardSettings) -> None:
        super().__init__(spec)
        self.function = reward_function(spec.function, f"evaluator {spec.name!r}: function")

    def score_group(
        self, task: Task, candidates: list[Candidate], repeat: int = 0
    ) -> list[Verdict]:
        # `repeat` is accepted for the common evaluator signature; the function runs once.
        if not candidates:
            return []
        n = len(candidates)
        started = time.perf_counter()
        values = self.function(
            prompts=[task.request or task.prompt] * n,
            completions=[c.completion for c in candidates],
            task_id=[task.task_id] * n,
            candidate_id=[c.candidate_id for c in candidates],
            entry_point=[task.entry_point] * n,
            test=[task.test] * n,
        )
        latency = (time.perf_counter() - started) / n
        where = f"reward {self.name!r} ({self.spec.function}) on task {task.task_id!r}"
        return [self._verdict(v, latency) for v in rewards(values, n, where)]

    def _verdict(self, value: float | None, latency_s: float) -> Verdict:
        if value is None:
            return Verdict.unscored("the reward function returned None", latency_s=latency_s)
        low, high = self.spec.min_score, self.spec.max_score
        score = (value - low) / (high - low)
        if 0.0 <= score <= 1.0:
            return Verdict.scored(score, raw_score=value, latency_s=latency_s)
        if self.spec.out_of_range == "clip":
            clipped = min(1.0, max(0.0, score))
            return Verdict.scored(clipped, raw_score=value, out_of_range=True, latency_s=latency_s)
        return Verdict.unscored(
            f"out of range: raw score {value:g} outside [{low:g}, {high:g}]",
            raw_score=value,
            out_of_range=True,
            latency_s=latency_s,
        )


def rewards(values: Any, n: int, where: str) -> list[float | None]:
    """`values` as n floats or None; anything else is a RewardFunctionError naming `where`."""
    if isinstance(values, str | bytes) or not hasattr(values, "__len__"):
        raise RewardFunctionError(
            f"{where}: returned {type(values).__name__}, not a list of {n} rewards"
        )
    values = list(values)
    if len(values) != n:
        raise RewardFunctionError(f"{where}: returned {len(values)} rewards for {n} completions")
    out: list[float | None] = []
    for i, value in enumerate(values):
        if value is None:
            out.append(None)
            continue
        if isinstance(value, bool) or not isinstance(value, Real):
            raise RewardFunctionError(
                f"{where}: completion {i}: {value!r} ({type(value).__name__}) is not a number "
                "or None"
            )
        if not math.isfinite(float(value)):
            raise RewardFunctionError(f"{where}: completion {i}: {value!r} is not finite")
        out.append(float(value))
    return out
