"""A resumed training run refuses any change to what it was trained on, not only train.*: the
system prompt, the training tasks (ids and content), the held-out pool, the reward's and the
tests' settings, and the dtype and device the policy resolved to. On the key functions alone
(`training.checkpoint`); the trainer's own use of them is in test_training_signals."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from judgelab.config import RolloutSettings, TrainSettings
from judgelab.config.evaluators import ExecutionSettings, RulerSettings
from judgelab.errors import ConfigError
from judgelab.training.checkpoint import (
    Checkpoint,
    check_resumable,
    check_same_policy,
    trained_on,
    trajectory_settings,
)
from judgelab.verdicts import Task

TRAIN = TrainSettings(epochs=2)
ROLLOUT = RolloutSettings()
TASKS = [
    Task("HumanEval/0", "humaneval", "def f(): ...", "f", "assert f() == 1", request="Write f."),
    Task("HumanEval/1", "humaneval", "def g(): ...", "g", "assert g() == 2", request="Write g."),
]
HELD = [Task("HumanEval/9", "humaneval", "def h(): ...", "h", "assert h()", request="Write h.")]
RULER = RulerSettings(name="ruler-a", judge="qwen-1.5b")
TESTS = ExecutionSettings(name="execution")


def key(
    rollout: RolloutSettings = ROLLOUT,
    tasks: list[Task] = TASKS,
    held: list[Task] = HELD,
    reward: RulerSettings = RULER,
    dtype: str | None = "float32",
    device: str | None = "cpu",
) -> dict:
    return trained_on(
        rollout, tasks, held, reward.model_dump(mode="json"), TESTS.model_dump(mode="json"),
        dtype, device,
    )  # fmt: skip


CKPT = Checkpoint(Path("out/a/checkpoints/step-001"), 1, [], False,
                  trajectory_settings(TRAIN), key())  # fmt: skip


def refusal(now: dict, settings: TrainSettings = TRAIN) -> str:
    with pytest.raises(ConfigError) as err:
        check_resumable("a", CKPT, settings, now)
    return str(err.value)


def test_the_same_key_resumes_and_raising_epochs_continues() -> None:
    check_resumable("a", CKPT, TRAIN, key(dtype=None))  # dtype/device: not known yet
    check_resumable("a", CKPT, TRAIN, key())
    check_resumable("a", CKPT, TRAIN.model_copy(update={"epochs": 5}), key())
    check_same_policy("a", CKPT, "float32", "cpu")


def test_a_changed_system_prompt_is_refused() -> None:
    text = refusal(key(RolloutSettings(system_prompt="Answer in French.")))
    assert "rollouts.system_prompt (the policy's prompt): trained with" in text
    assert "now 'Answer in French.'" in text
    assert "out/a" in text  # says which folder to delete to retrain


def test_changed_tasks_are_refused_naming_them() -> None:
    edited = [TASKS[0], replace(TASKS[1], test="assert g() == 3")]
    assert "the training tasks (the tasks table's tasks with tests, cycled in order): " \
        "content changed ['HumanEval/1']" in refusal(key(tasks=edited))  # fmt: skip
    more = refusal(key(tasks=[*TASKS, HELD[0]]))
    assert "added ['HumanEval/9']" in more
    assert "removed ['HumanEval/1']" in refusal(key(tasks=TASKS[:1]))
    assert "reordered" in refusal(key(tasks=TASKS[::-1]))  # another cycle, another trajectory
    held = [replace(HELD[0], request="Write h, fast.")]
    assert "the held-out tasks or their pool (train.heldout): content changed" in refusal(
        key(held=held)
    )


def test_a_changed_reward_definition_is_refused_naming_the_field() -> None:
    text = refusal(key(reward=RULER.model_copy(update={"judge": "qwen-0.5b"})))
    assert "the reward evaluator's settings (scores.evaluators): judge: trained with " \
        "'qwen-1.5b', now 'qwen-0.5b'" in text  # fmt: skip


def test_a_changed_dtype_or_device_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"train\.dtype, as resolved: trained with 'float32', "
                       r"now 'bfloat16'"):  # fmt: skip
        check_same_policy("a", CKPT, "bfloat16", "cpu")
    with pytest.raises(ConfigError, match=r"train\.device, as resolved: trained with 'cpu'"):
        check_same_policy("a", CKPT, "float32", "cuda")


def test_every_change_is_named_at_once_with_train_settings() -> None:
    text = refusal(
        key(RolloutSettings(system_prompt="x"), tasks=TASKS[:1]),
        TRAIN.model_copy(update={"learning_rate": 0.1}),
    )
    assert "train.learning_rate: trained with 5e-05, now 0.1" in text
    assert "rollouts.system_prompt" in text and "removed ['HumanEval/1']" in text


def test_a_checkpoint_from_before_the_key_is_checked_on_train_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = replace(CKPT, trained_on=None)
    check_resumable("a", old, TRAIN, key(RolloutSettings(system_prompt="x")))
    assert "records train.* only" in caplog.text
    check_same_policy("a", old, "bfloat16", "cuda")  # nothing recorded to hold it to
    with pytest.raises(ConfigError, match="train.learning_rate"):
        check_resumable("a", old, TRAIN.model_copy(update={"learning_rate": 0.1}), key())
