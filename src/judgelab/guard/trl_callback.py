"""The TRL adapter's `TrainerCallback` (`judgelab.guard.trl` has the contract): reads the design
when training begins and restores the guard on a resumed run, stops or flags the run at the end
of the step whose rewards raised the alarm (with a checkpoint first), writes the guard's state
into every checkpoint, and logs to MLflow. Every rank runs it alike: the decision it acts on was
broadcast from rank 0 inside the reward call, so every rank stops at the same step; files and
MLflow are written by rank 0 alone. transformers is imported when the callback is made.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from judgelab.guard import record as rec

log = logging.getLogger(__name__)


def resume_folder(args: Any, state: Any, restore: bool | str | Path) -> Path | None:
    """The checkpoint a run resumes from, or None for a fresh run (or `restore=False`)."""
    if restore is False or not state.global_step:
        return None
    if restore is not True:
        return Path(restore)
    given = getattr(args, "resume_from_checkpoint", None)
    if isinstance(given, str) and Path(given).name == f"checkpoint-{state.global_step}":
        return Path(given)
    return Path(args.output_dir) / f"checkpoint-{state.global_step}"


def guard_callback(run: Any, action: str, mlflow: bool, restore: bool | str | Path) -> Any:
    """The callback over `run`, the state `judgelab.guard.trl` shares with its wrappers."""
    from transformers import TrainerCallback

    class GuardCallback(TrainerCallback):
        """Stops or flags the run once the guard has fired (`judgelab.guard.trl`)."""

        def __init__(self) -> None:
            self.guard = run.guard
            self.stopped_at: int | None = None
            self._alarm_logged = False

        @property
        def record(self) -> rec.Record:
            return run.record

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            run.configure(args)
            if (folder := resume_folder(args, state, restore)) is not None:
                run.restore(folder)
                self._alarm_logged = run.record.fired_step is not None
            if state.is_world_process_zero and (mlf := rec.mlflow_run()) is not None:
                mlf.set_tag("judgelab.guard.reward", run.record.reward)

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if mlflow and state.is_world_process_zero and (mlf := rec.mlflow_run()) is not None:
                mlf.log_metrics(self.guard.status().metrics(), step=state.global_step)
            if run.record.fired_step is None:
                return
            if action == "flag":
                self._log_alarm(state)
                return
            if self.stopped_at is None:
                self.stopped_at = state.global_step
                control.should_save = True  # the checkpoint first (on_save names it)
                log.warning("stopping the run at step %d: %s", state.global_step,
                            run.record.alarm_text())  # fmt: skip
            control.should_training_stop = True

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if self.stopped_at == state.global_step and run.record.checkpoint is None:
                run.record.checkpoint = str(folder)
            if state.is_world_process_zero:
                rec.save(folder, self.guard, run.record)
            if self.stopped_at is not None:
                self._log_alarm(state)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if run.record.fired_step is not None:
                self._log_alarm(state)
            if state.is_world_process_zero:
                log.info("%s; watching %s", self.guard.status().summary(), run.record.reward)

        def _log_alarm(self, state: Any) -> None:
            if not self._alarm_logged and state.is_world_process_zero:
                rec.log_alarm(run.record, state.global_step)
            self._alarm_logged = True

    return GuardCallback()
