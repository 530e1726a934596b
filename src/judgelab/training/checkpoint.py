"""A run's checkpoints (`checkpoints/step-NNN`: adapter, optimiser state, history so far and
what it was trained under), the newest one, and the check that a resumed run would continue
its trajectory (`check_resumable`, `check_same_policy`).

What a run was trained under is its resume key: the train.* settings that shape the
trajectory (`trajectory_settings`, the checkpoint's `settings`) and everything else that
changes what is trained or measured (`trained_on`, the checkpoint's `trained_on`): the system
prompt the policy sees, the training tasks (ids and content, in the order they are cycled),
the held-out pool, the reward evaluator's settings, the tests' settings, and the dtype and
device `train.dtype` / `train.device` resolved to. A change to any of them refuses the resume,
naming each change."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from judgelab.cache import digest
from judgelab.config import RolloutSettings, TrainSettings
from judgelab.errors import ConfigError
from judgelab.verdicts import Task

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    steps: int
    history: list[dict]
    done: bool
    settings: dict | None = None  # `trajectory_settings` of the run (None: written before)
    trained_on: dict | None = None  # `trained_on` of the run (None: written before)


def latest_checkpoint(root: Path) -> Checkpoint | None:
    best = None
    for d in sorted(root.glob("step-*")):
        state = d / "state.json"
        if not state.exists():  # an interrupted write never gets here (atomic), but be sure
            continue
        body = json.loads(state.read_text())
        best = Checkpoint(
            d, body["steps"], body["history"], body["done"], body.get("settings"),
            body.get("trained_on"),
        )  # fmt: skip
    return best


# train.* keys that do not change a policy's trajectory: the runs planned (each run checks
# itself), how long to train (raising it continues), and what is derived from the history
NOT_TRAJECTORY = frozenset({"rewards", "seeds", "epochs", "hacking_margin", "alarm_alpha"})
WHY = {
    "learning_rate": "the optimiser's state was built at the old rate, and a run whose rate "
    "changes midway is a run of neither setting",
    "lora": "the adapter's shape or scale would change under the trained weights",
}


def trajectory_settings(settings: TrainSettings) -> dict:
    """The train.* settings a checkpoint must have been trained under to be resumed."""
    return {k: v for k, v in settings.model_dump().items() if k not in NOT_TRAJECTORY}


def _flat(d: Mapping, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        out |= _flat(v, f"{prefix}{k}.") if isinstance(v, Mapping) else {f"{prefix}{k}": v}
    return out


def task_digests(tasks: Sequence[Task]) -> list[list[str]]:
    """[task id, digest of its content] per task, in order: a task whose prompt, tests or
    request changed is another task under the same id."""
    return [[task.task_id, digest(asdict(task))[:16]] for task in tasks]


def trained_on(
    rollout: RolloutSettings,
    tasks: Sequence[Task],
    heldout: Sequence[Task],
    reward: Mapping[str, Any],
    tests: Mapping[str, Any],
    dtype: str | None = None,
    device: str | None = None,
) -> dict[str, Any]:
    """The resume key beside train.*: what a run was trained and measured on (module doc).
    `reward`, `tests`: the reward evaluator's and the tests' settings (as dumped); `dtype`,
    `device`: what the policy resolved them to (None: not known yet, not compared)."""
    key: dict[str, Any] = {
        "system_prompt": rollout.system_prompt,
        "tasks": task_digests(tasks),
        "heldout": task_digests(heldout),
        "reward": dict(reward),
        "tests": dict(tests),
    }
    if dtype is not None:
        key |= {"dtype": dtype, "device": device}
    return json.loads(json.dumps(key))  # as a checkpoint holds it: lists, not tuples


def _short(value: Any, width: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _task_changes(saved: list[list[str]], now: list[list[str]]) -> str:
    """`added [..]; removed [..]; content changed [..]` (or `reordered`) between two
    `task_digests`."""
    old, new = dict(map(tuple, saved)), dict(map(tuple, now))
    parts = []
    if added := [t for t in new if t not in old]:
        parts.append(f"added {added}")
    if removed := [t for t in old if t not in new]:
        parts.append(f"removed {removed}")
    if changed := [t for t in new if t in old and old[t] != new[t]]:
        parts.append(f"content changed {changed}")
    return "; ".join(parts) or "reordered (the groups cycle through them in order)"


def _settings_changes(label: str, saved: Mapping, now: Mapping) -> list[str]:
    s, n = _flat(saved), _flat(now)
    return [
        f"{label}: {k}: trained with {_short(s.get(k))}, now {_short(n.get(k))}"
        for k in sorted(set(s) | set(n))
        if s.get(k) != n.get(k)
    ]


# each part of `trained_on` as a refusal names it
LABELS = {
    "system_prompt": "rollouts.system_prompt (the policy's prompt)",
    "tasks": "the training tasks (the tasks table's tasks with tests, cycled in order)",
    "heldout": "the held-out tasks or their pool (train.heldout)",
    "reward": "the reward evaluator's settings (scores.evaluators)",
    "tests": "the tests' settings (the truth's test runner)",
    "dtype": "train.dtype, as resolved",
    "device": "train.device, as resolved",
}


def _trained_on_changes(saved: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """One line per part of `now` that differs from the checkpoint's (`saved`)."""
    lines = []
    for part, value in now.items():
        old = saved.get(part)
        if old == value:
            continue
        label = LABELS[part]
        if part in ("tasks", "heldout") and old is not None:
            lines.append(f"{label}: {_task_changes(old, value)}")
        elif part in ("reward", "tests") and old is not None:
            lines += _settings_changes(label, old, value)
        else:
            lines.append(f"{label}: trained with {_short(old)}, now {_short(value)}")
    return lines


def _refuse(key: str, ckpt: Checkpoint, lines: Sequence[str]) -> None:
    raise ConfigError(
        f"{key}: the checkpoint {ckpt.path} was trained under other settings; resuming would "
        "change what it trains:\n  " + "\n  ".join(lines) + "\nRestore them, or delete "
        f"{ckpt.path.parent.parent} to retrain (raising train.epochs alone continues a run)"
    )


def check_resumable(
    key: str, ckpt: Checkpoint, settings: TrainSettings, now: Mapping[str, Any]
) -> None:
    """Refuse to resume `ckpt` when its resume key differs from the current one (naming each
    change: the key, its saved and its current value, and why where it is not obvious), or
    with fewer epochs than it has already trained. `now`: the current `trained_on` (the parts
    given are compared; the policy's dtype and device come later, `check_same_policy`). A
    checkpoint written before judgelab kept its settings cannot be checked: resumed with a
    warning; one written before it kept `trained_on` is checked on train.* alone."""
    if ckpt.steps > settings.epochs:
        raise ConfigError(
            f"train.epochs: {key} has already taken {ckpt.steps} steps, more than "
            f"train.epochs = {settings.epochs}; raise it back, or delete "
            f"{ckpt.path.parent.parent} to retrain"
        )
    if ckpt.settings is None:
        log.warning("%s: checkpoint %s does not record its settings; resuming unchecked",
                    key, ckpt.path)  # fmt: skip
        return
    saved, current = _flat(ckpt.settings), _flat(trajectory_settings(settings))
    lines = []
    for k in sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k)):
        why = WHY.get(k.split(".")[0])
        lines.append(
            f"train.{k}: trained with {saved.get(k)!r}, now {current.get(k)!r}"
            + (f" ({why})" if why else "")
        )
    if ckpt.trained_on is None:
        log.warning("%s: checkpoint %s records train.* only; its system prompt, tasks, reward "
                    "and dtype are not checked", key, ckpt.path)  # fmt: skip
    else:
        lines += _trained_on_changes(ckpt.trained_on, now)
    if lines:
        _refuse(key, ckpt, lines)


def check_same_policy(key: str, ckpt: Checkpoint, dtype: str, device: str) -> None:
    """Refuse to resume `ckpt` on a policy whose dtype or device resolved otherwise than the
    one it was trained on (`train.dtype: auto` picks by machine): bfloat16 and float32, CPU
    and CUDA draw different tokens and take different steps."""
    if ckpt.trained_on is None:
        return
    lines = _trained_on_changes(ckpt.trained_on, {"dtype": dtype, "device": device})
    if lines:
        _refuse(key, ckpt, lines)
