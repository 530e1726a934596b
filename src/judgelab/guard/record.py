"""What a trainer adapter keeps beside the guard (`Record`): which reward it watches, the last
safe step, the step of the alarm and the checkpoint saved at it; the figures to log where a
logger averages them; the guard's state file in a trainer's checkpoint; the alarm in MLflow.

**The last safe step** is the latest step s whose batch left the guard quiet with a positive
alignment so far: the completions the policy produced after s updates were still paid for
passing code, so a checkpoint of s updates (`checkpoint-s` in TRL) is where to go back to.

**Logged so that averaging cannot blur them.** A trainer's logger may average a figure over its
logging period (TRL's `log_metric`: the mean over the period's batches and the ranks), which
turned a 0/1 `guard/fired` into 0.25. `metrics()` leaves `guard/fired` out and, from the alarm
on, gives `guard/fired_step` and `guard/last_safe_step`: both constant from then on, so any
average of them is the value itself. The continuous figures (e-value, alignment) stay, as
averages over the period where the logger averages.

**The state file** (`STATE_FILE`, JSON) holds the guard's `state_dict()` and the record; a
trainer's checkpoint folder gets one, and a run resumed from that checkpoint continues the same
e-process (`load`), not a fresh one.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from judgelab.guard.core import Guard, GuardStatus

log = logging.getLogger(__name__)

STATE_FILE = "judgelab_guard.json"
FORMAT = 1


@dataclass
class Record:
    """The adapter's record of a run (module doc). Plain values: it crosses ranks and files."""

    reward: str = "the judge's reward"  # which reward the guard watches, in words
    last_safe_step: int | None = None
    fired_step: int | None = None
    checkpoint: str | None = None  # the checkpoint saved at the alarm

    def update(self, status: GuardStatus, step: int) -> bool:
        """After the guard has seen `step`'s batch; True when the alarm is new."""
        if status.fired:
            new = self.fired_step is None
            if new:
                self.fired_step = status.fired_at_step
            return new
        if status.alignment is not None and status.alignment > 0:
            self.last_safe_step = step
        return False

    def metrics(self, status: GuardStatus) -> dict[str, float]:
        """The figures to log through an averaging logger (module doc)."""
        out = {k: v for k, v in status.metrics().items() if k != "guard/fired"}
        if self.fired_step is not None:
            out["guard/fired_step"] = float(self.fired_step)
            # -1: no step was safe (the guard fired before alignment was ever positive)
            safe = -1 if self.last_safe_step is None else self.last_safe_step
            out["guard/last_safe_step"] = float(safe)
        return out

    def alarm_text(self) -> str:
        safe = "none" if self.last_safe_step is None else str(self.last_safe_step)
        where = f"; checkpoint {self.checkpoint}" if self.checkpoint else ""
        return f"reward guard fired at step {self.fired_step}; last safe step {safe}{where}"


def save(folder: str | Path, guard: Guard, record: Record) -> Path:
    """The guard's state and the record into `folder`/STATE_FILE, written atomically."""
    path = Path(folder) / STATE_FILE
    body = {"format": FORMAT, "guard": guard.state_dict(), "record": asdict(record)}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body))
    os.replace(tmp, path)
    return path


def read(folder: str | Path) -> dict[str, Any]:
    """The state file of `folder`, checked; FileNotFoundError naming the path when absent."""
    path = Path(folder) / STATE_FILE
    if not path.exists():
        raise FileNotFoundError(
            f"{path}: no guard state here; a run resumed from it would start a fresh e-process "
            "(to start one knowingly: trl_guard(..., restore=False), or skip ArtGuard.restore)"
        )
    body = json.loads(path.read_text())
    if body.get("format") != FORMAT or not {"guard", "record"} <= set(body):
        raise ValueError(f"{path}: not a judgelab guard state of format {FORMAT}")
    return body


def load(body: dict[str, Any], guard: Guard | None) -> Record:
    """`read`'s state into `guard` (None: the record only) and the record back."""
    if guard is not None:
        guard.load_state_dict(body["guard"])
    return Record(**body["record"])


def mlflow_run() -> Any:
    """The mlflow module when it is imported and a run is active, else None (the guard never
    starts a run, nor imports mlflow into a process that does not use it)."""
    mlf = sys.modules.get("mlflow")
    return mlf if mlf is not None and mlf.active_run() is not None else None


def log_alarm(record: Record, step: int) -> None:
    """The alarm, the last safe step and the checkpoint to the log and the active MLflow run."""
    log.warning("%s", record.alarm_text())
    if (mlf := mlflow_run()) is None:
        return
    safe = -1 if record.last_safe_step is None else record.last_safe_step
    mlf.log_metrics({"guard/fired_step": float(record.fired_step or 0),
                     "guard/last_safe_step": float(safe)}, step=step)  # fmt: skip
    mlf.set_tags({
        "judgelab.guard.fired": str(record.fired_step),
        "judgelab.guard.last_safe_step": str(record.last_safe_step),
        "judgelab.guard.checkpoint": str(record.checkpoint),
    })  # fmt: skip
