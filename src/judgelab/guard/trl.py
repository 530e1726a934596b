"""The guard on TRL's `GRPOTrainer`: a reward-function wrapper and a `TrainerCallback`.

`trl_guard(guard, judge, verdict)` returns (reward_function, callback):

- the reward function calls `judge` with TRL's arguments (`prompts`, `completions`, the
  dataset's other columns, `trainer_state`, ...), hands the batch, the judge's rewards and the
  trainer's step to `guard.observe`, logs the guard's figures through TRL's `log_metric`
  (`guard/evalue`, `guard/alignment`, ...: the trainer's logger and every `report_to` backend,
  MLflow included), and returns the judge's rewards unchanged (None stays None: unscored);
- the callback reads the group size (`num_generations`) when training begins and, after each
  step, stops the run (`action="stop"`: `control.should_training_stop`; the step whose rewards
  raised the alarm has been taken) or only flags it (`action="flag"`) once the alarm has fired,
  and with `mlflow=True` logs the figures to the active MLflow run at each step and tags it
  `judgelab.guard.fired` when it fires.

TRL calls a reward function with the whole generation batch, each prompt's `num_generations`
completions in a row; the guard's groups are those rows (one process: on several, each process
sees its own slice). `verdict(key, completion)` gets the row's `key` column (default: the
prompt) and the completion's text; `judgelab.guard.truth.task_verdict` runs judgelab tasks'
tests in the sandbox. transformers is imported when the callback is made, not before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from judgelab.guard.core import Guard

log = logging.getLogger(__name__)

ACTIONS = ("stop", "flag")


def completion_text(completion: Any) -> str:
    """A TRL completion as text: a string as it is, a conversation's last message's content."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content") or "")
    raise TypeError(f"a completion TRL gives is a string or messages, not {type(completion)}")


def trl_guard(
    guard: Guard,
    judge: Callable[..., Sequence[float | None]],
    verdict: Callable[[Any, str], bool | None] | None = None,
    *,
    key: str = "prompt",
    action: str = "stop",
    mlflow: bool = False,
) -> tuple[Callable[..., list[float | None]], Any]:
    """(reward function, callback) for `GRPOTrainer(reward_funcs=..., callbacks=[...])`
    (module doc)."""
    if action not in ACTIONS:
        raise ValueError(f"action {action!r}: one of {ACTIONS}")
    design: dict[str, int | None] = {"group_size": None}

    def reward(prompts: list, completions: list, **kwargs: Any) -> list[float | None]:
        rewards = list(judge(prompts=prompts, completions=completions, **kwargs))
        state = kwargs.get("trainer_state")
        keys = prompts if key == "prompt" else kwargs[key]
        texts = [completion_text(c) for c in completions]
        guard.observe(
            prompts,
            texts,
            rewards,
            None if verdict is None else (lambda i: verdict(keys[i], texts[i])),
            step=None if state is None else state.global_step,
            group_size=design["group_size"],
        )
        if (log_metric := kwargs.get("log_metric")) is not None:
            for name, value in guard.status().metrics().items():
                log_metric(name, value)
        return rewards

    reward.__name__ = getattr(judge, "__name__", "judge")
    return reward, _callback(guard, design, action, mlflow)


def _callback(guard: Guard, design: dict[str, int | None], action: str, mlflow: bool) -> Any:
    from transformers import TrainerCallback

    class GuardCallback(TrainerCallback):
        """Stops or flags the run once the guard has fired (`trl_guard`)."""

        def __init__(self) -> None:
            self.guard = guard
            self.stopped_at: int | None = None
            self._tagged = False

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            design["group_size"] = getattr(args, "num_generations", None)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if mlflow:
                self._mlflow(state.global_step)
            if not guard.fired:
                return
            if action == "stop" and self.stopped_at is None:
                self.stopped_at = state.global_step
                log.warning("stopping the run at step %d: %s", state.global_step,
                            guard.status().summary())  # fmt: skip
            if action == "stop":
                control.should_training_stop = True

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            log.info("%s", guard.status().summary())

        def _mlflow(self, step: int) -> None:
            import mlflow as mlf

            if mlf.active_run() is None:
                return
            status = guard.status()
            mlf.log_metrics(status.metrics(), step=step)
            if status.fired and not self._tagged:
                mlf.set_tag("judgelab.guard.fired", str(status.fired_at_step))
                self._tagged = True

    return GuardCallback()
