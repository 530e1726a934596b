"""The guard on TRL's `GRPOTrainer`: reward-function wrappers and a `TrainerCallback`.

`trl_guard(guard, judges, verdict)` returns (reward functions, callback); pass every reward
function of the run through it, in the order of `GRPOConfig.reward_weights`:

- **Which reward.** Each wrapper calls its function with TRL's arguments and returns its
  rewards unchanged (None stays None: unscored). Once every function has scored a batch, the
  guard watches the reward TRL trains on (`combine`): the functions' rewards weighted by
  `reward_weights` and joined by `multi_objective_aggregation` (`sum_then_normalize`: the
  weighted sum; `normalize_then_sum`: the sum of each function's group-normalised rewards), a
  row that every function left unscored unscored. `scale_rewards` (group, batch, none) only
  multiplies a group's advantages by a positive number, which changes no group's evidence
  (the guard's per-group statistics are scale-free), so the alarm is the one TRL's own
  advantages would raise; the alignment figure weighs groups as `scale_rewards="group"` does.
  `watch=` a function's name (or index) watches that function alone. The callback states what
  is watched (`record.reward`: the log at train begin, MLflow tag `judgelab.guard.reward`).
- **Ranks** (`judgelab.guard.ranks`). Under accelerate each process scores its own slice; the
  slices are gathered and cut into groups of `num_generations` (a group may straddle ranks),
  rank 0's guard sees the whole batch, asks the verdicts and decides, and its decision reaches
  every rank in the same reward call, so every rank stops at the same step. A batch whose
  groups cannot be formed raises on every rank, naming the step, the rank and the group. Only
  rank 0's `guard` holds the e-process; `callback.record` is the same on every rank.
- **The alarm.** With `action="stop"`, at the end of the step whose rewards raised it, the
  callback sets `control.should_save` (the trainer writes a checkpoint) and
  `control.should_training_stop`; the record names the step, the last safe step and the
  checkpoint, and they go to the log and, when an MLflow run is active, to its metrics and
  tags. `action="flag"` records and logs, and trains on.
- **Checkpoints.** Every checkpoint the trainer saves gets the guard's state
  (`judgelab.guard.record.STATE_FILE`); a run resumed from one continues its e-process
  (`restore=True`: the checkpoint of the resumed step under `output_dir`, or
  `args.resume_from_checkpoint`; a path: that folder; False: start afresh). A resumed run
  whose checkpoint has no guard state raises rather than silently starting a fresh e-process.
- **Logging.** The figures go through TRL's `log_metric` (the trainer's log and every
  `report_to` backend), which averages them over each logging period and the ranks; the alarm
  is logged as `guard/fired_step` and `guard/last_safe_step`, constant from the alarm on, so no
  average blurs them (`judgelab.guard.record`). With `mlflow=True` the callback also logs the
  figures, unaveraged, to the active MLflow run at every step.

`verdict(key, completion)` gets the row's `key` column (default: the prompt) and the
completion's text; `judgelab.guard.truth.task_verdict` runs judgelab tasks' tests in the
sandbox. transformers is imported when the callback is made, not before.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from judgelab.advantage import grouped_advantages
from judgelab.guard import record as rec
from judgelab.guard.core import Guard
from judgelab.guard.ranks import Batch, Ranks, Slice, join, ranks
from judgelab.guard.trl_callback import guard_callback

log = logging.getLogger(__name__)

ACTIONS = ("stop", "flag")
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")
Judge = Callable[..., Any]


def completion_text(completion: Any) -> str:
    """A TRL completion as text: a string as it is, a conversation's last message's content."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content") or "")
    raise TypeError(f"a completion TRL gives is a string or messages, not {type(completion)}")


def combine(
    rewards: Mapping[str, Sequence[float | None]],
    weights: Sequence[float],
    group_size: int,
    aggregation: str = "sum_then_normalize",
) -> list[float | None]:
    """The reward TRL trains on, per completion (module doc), as GRPOTrainer forms it before
    taking advantages: NaN-aware sums, each group's std with Bessel's correction + 1e-4."""
    r = np.array([[np.nan if v is None else float(v) for v in col] for col in rewards.values()])
    r, w = r.T, np.asarray(weights, dtype=float)  # (completions, functions)
    unscorable = np.isnan(r).all(axis=1)
    if aggregation == "sum_then_normalize":
        out = np.nansum(r * w, axis=1)
    elif aggregation == "normalize_then_sum":
        out = np.nansum(_normalised_per_function(r, group_size) * w, axis=1)
    else:
        raise ValueError(f"multi_objective_aggregation {aggregation!r}: one of {AGGREGATIONS}")
    return [None if bad else float(v) for v, bad in zip(out, unscorable, strict=True)]


def _normalised_per_function(r: np.ndarray, group_size: int) -> np.ndarray:
    """Each reward function's group-normalised rewards (TRL's normalize_then_sum), through the
    one advantage (`judgelab.advantage`, Bessel's std as TRL's): a missing reward (NaN) takes
    no part in its group's mean and std and stays NaN, as with TRL's nanmean/nanstd; its std
    + 1e-4 as TRL's (a flat group: 0 in both)."""
    out = np.full(r.shape, np.nan)
    groups = np.arange(r.shape[0]) // group_size
    for j in range(r.shape[1]):
        ok = ~np.isnan(r[:, j])
        out[ok, j] = grouped_advantages(r[ok, j], groups[ok], "std", ddof=1, eps=1e-4)
    return out


def describe(names: Sequence[str], weights: Sequence[float], aggregation: str,
             scale_rewards: object, watch: str | None) -> str:  # fmt: skip
    """Which reward the guard watches, in words."""
    if watch is not None:
        return f"reward function {watch!r} alone (not the combined reward TRL trains on)"
    terms = " + ".join(f"{w:g}*{n}" for n, w in zip(names, weights, strict=True))
    return (f"the reward TRL trains on: {terms} ({aggregation}; scale_rewards={scale_rewards}, "
            "which does not change the alarm)")  # fmt: skip


def _verdict_value(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    raise TypeError(f"{where}: a verdict is True, False, a number or None, not {value!r}")


class _Run:
    """What the wrappers and the callback share (module doc)."""

    def __init__(self, guard: Guard, names: list[str], verdict: Callable | None, key: str,
                 watch: str | None) -> None:  # fmt: skip
        self.guard, self.names, self.verdict, self.key, self.watch = (
            guard, names, verdict, key, watch)  # fmt: skip
        self.group_size: int | None = None
        self.weights = [1.0] * len(names)
        self.aggregation = "sum_then_normalize"
        self.record = rec.Record(reward=describe(names, self.weights, self.aggregation,
                                                 "group", watch))  # fmt: skip
        self.metrics: dict[str, float] = {}
        self._ranks: Ranks | None = None
        self._batch: int | None = None
        self._pending: dict[int, list[float | None]] = {}
        self._step = -1

    @property
    def ranks(self) -> Ranks:
        if self._ranks is None:  # made at the same call on every rank: train begin
            self._ranks = ranks()
        return self._ranks

    def configure(self, args: Any) -> None:
        """The design from the trainer's GRPOConfig, checked against the wrapped functions."""
        k = getattr(args, "num_generations", None)
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"num_generations {k!r}: the guard needs the trainer's group size")
        self.group_size = k
        weights = getattr(args, "reward_weights", None)
        if weights is not None and len(weights) != len(self.names):
            raise ValueError(f"reward_weights has {len(weights)} weights for the guard's "
                             f"{len(self.names)} reward functions {self.names}: pass every "
                             "reward function of the run through trl_guard")  # fmt: skip
        self.weights = [1.0] * len(self.names) if weights is None else [float(w) for w in weights]
        self.aggregation = getattr(args, "multi_objective_aggregation", "sum_then_normalize")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"multi_objective_aggregation {self.aggregation!r}: the guard "
                             f"knows {AGGREGATIONS}")  # fmt: skip
        scale = getattr(args, "scale_rewards", "group")
        self.record.reward = describe(self.names, self.weights, self.aggregation, scale,
                                      self.watch)  # fmt: skip
        log.info("reward guard watches %s", self.record.reward)

    def report(self, index: int, prompts: list, completions: list, kwargs: dict,
               rewards: list[float | None]) -> None:  # fmt: skip
        """Function `index` has scored the batch; once all have, the guard sees it."""
        if self._batch != id(prompts):  # TRL hands one batch's list to every function
            self._batch, self._pending = id(prompts), {}
        self._pending[index] = rewards
        if len(self._pending) == len(self.names):
            outputs, self._pending, self._batch = self._pending, {}, None
            self._observe(prompts, completions, kwargs, outputs)

    def _slice(self, prompts: list, completions: list, kwargs: dict,
               outputs: dict[int, list[float | None]], step: int) -> Slice:  # fmt: skip
        rank, keys, texts, error = self.ranks.rank, list(prompts), [], None
        try:
            if self.key != "prompt":
                if self.key not in kwargs:
                    raise KeyError(f"no column {self.key!r} for the verdicts' key")
                keys = list(kwargs[self.key])
            texts = [completion_text(c) for c in completions]
        except (KeyError, TypeError) as e:
            error = str(e)
        rewards = {self.names[i]: list(outputs[i]) for i in range(len(self.names))}
        return Slice(rank, step, list(prompts), keys, texts, rewards, error)

    def _observe(self, prompts: list, completions: list, kwargs: dict,
                 outputs: dict[int, list[float | None]]) -> None:  # fmt: skip
        state = kwargs.get("trainer_state")
        step = self._step + 1 if state is None else int(state.global_step)
        self._step = step
        if (k := self.group_size) is None:
            raise RuntimeError("the guard's callback is not among the trainer's callbacks")
        here = self._slice(prompts, completions, kwargs, outputs, step)
        batch = join(self.ranks.gather(here), k)  # raises alike on every rank
        failure: BaseException | None = None
        decision: dict[str, Any] | None = None
        if self.ranks.rank == 0:
            try:
                decision = self._decide(batch, k)
            except Exception as e:  # every rank must hear of it, or the others would wait
                failure, decision = e, {"error": f"{type(e).__name__}: {e}"}
        decision = self.ranks.broadcast(decision)
        if decision.get("error"):
            if failure is not None:
                raise failure
            raise RuntimeError(f"the reward guard failed on rank 0: {decision['error']}")
        self.record, self.metrics = rec.Record(**decision["record"]), decision["metrics"]
        if (log_metric := kwargs.get("log_metric")) is not None:
            for name, value in sorted(self.metrics.items()):  # same names on every rank
                log_metric(name, value)

    def watched(self, batch: Batch, k: int) -> list[float | None]:
        if self.watch is not None:
            return batch.rewards[self.watch]
        return combine(batch.rewards, self.weights, k, self.aggregation)

    def _decide(self, batch: Batch, k: int) -> dict[str, Any]:
        self.guard.observe(
            batch.prompts, batch.texts, self.watched(batch, k),
            None if self.verdict is None else self._verdicts(batch, k),
            step=batch.step, group_size=k,
        )  # fmt: skip
        status = self.guard.status()
        if self.record.update(status, batch.step):
            log.warning("%s: %s", self.record.alarm_text(), status.summary())
        return {"error": None, "record": asdict(self.record),
                "metrics": self.record.metrics(status)}  # fmt: skip

    def _verdicts(self, batch: Batch, k: int) -> Callable[[int], Any]:
        verdict = self.verdict
        assert verdict is not None

        def ask(i: int) -> Any:
            g = i // k
            rank, row = batch.origin[i]
            where = (f"step {batch.step}, group {g} ({batch.where(range(g * k, g * k + k))}), "
                     f"completion {i} (rank {rank} row {row}, key {batch.keys[i]!r})")  # fmt: skip
            try:
                return _verdict_value(verdict(batch.keys[i], batch.texts[i]), where)
            except LookupError as e:
                raise ValueError(f"{where}: no verdict: {e}") from e

        return ask

    def restore(self, folder: str | Path) -> None:
        """The guard's state from a checkpoint: rank 0 reads it, every rank gets it."""
        body: dict[str, Any] | None = None
        failure: BaseException | None = None
        if self.ranks.rank == 0:
            try:
                body = rec.read(folder)
            except (OSError, ValueError) as e:
                failure, body = e, {"error": str(e)}
        body = self.ranks.broadcast(body)
        if "error" in body:
            raise failure if failure is not None else RuntimeError(body["error"])
        self.record = rec.load(body, self.guard if self.ranks.rank == 0 else None)
        if self.ranks.rank == 0:
            log.info("reward guard restored from %s: %s", folder, self.guard.status().summary())


def _wrap(run: _Run, index: int, judge: Judge) -> Judge:
    if isinstance(judge, str) or hasattr(judge, "parameters") or not callable(judge):
        raise TypeError(f"reward function {index} ({judge!r}): the guard wraps reward "
                        "functions, not reward models")  # fmt: skip

    if inspect.iscoroutinefunction(judge):

        async def areward(prompts: list, completions: list, **kwargs: Any) -> list:
            rewards = list(await judge(prompts=prompts, completions=completions, **kwargs))
            run.report(index, prompts, completions, kwargs, rewards)
            return rewards

        wrapped: Judge = areward
    else:

        def reward(prompts: list, completions: list, **kwargs: Any) -> list:
            rewards = list(judge(prompts=prompts, completions=completions, **kwargs))
            run.report(index, prompts, completions, kwargs, rewards)
            return rewards

        wrapped = reward
    wrapped.__name__ = run.names[index]
    return wrapped


def trl_guard(
    guard: Guard,
    judge: Judge | Sequence[Judge],
    verdict: Callable[[Any, str], bool | None] | None = None,
    *,
    key: str = "prompt",
    action: str = "stop",
    mlflow: bool = False,
    watch: str | int | None = None,
    restore: bool | str | Path = True,
) -> tuple[Any, Any]:
    """(reward function(s), callback) for `GRPOTrainer(reward_funcs=..., callbacks=[...])`
    (module doc): one function for one judge, a list for a list."""
    if action not in ACTIONS:
        raise ValueError(f"action {action!r}: one of {ACTIONS}")
    judges = [judge] if callable(judge) else list(judge)
    names = [getattr(f, "__name__", f"reward_{i}") for i, f in enumerate(judges)]
    if len(set(names)) != len(names):
        raise ValueError(f"reward functions {names}: the guard needs distinct names")
    if isinstance(watch, int):
        if not 0 <= watch < len(names):
            raise ValueError(f"watch={watch}: there are {len(names)} reward functions {names}")
        watch = names[watch]
    if watch is not None and watch not in names:
        raise ValueError(f"watch={watch!r}: one of the reward functions {names}, or None")
    run = _Run(guard, names, verdict, key, watch)
    wrapped = [_wrap(run, i, f) for i, f in enumerate(judges)]
    callback = guard_callback(run, action, mlflow, restore)
    return (wrapped[0] if callable(judge) else wrapped), callback
