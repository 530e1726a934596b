"""The TRL adapter's own logic, with transformers' real callback objects and no model: the
wrapper hands TRL's arguments to the judge and the batch to the guard at the trainer's step,
in groups of `num_generations` (read when training begins), logs through `log_metric`, returns
the judge's rewards unchanged; the callback stops the run (`stop`) or only flags it (`flag`)
once the alarm has fired. tests/integration/test_guard_trl.py runs it inside a real
GRPOTrainer."""

from __future__ import annotations

import pytest

from judgelab.guard import Guard
from judgelab.guard.trl import completion_text, trl_guard

tc = pytest.importorskip("transformers.trainer_callback")


@pytest.mark.parametrize("action", ["stop", "flag"])
def test_wrapper_and_callback(action: str) -> None:
    guard = Guard()
    seen: list[dict] = []

    def judge(prompts: list, completions: list, **kwargs: object) -> list:
        seen.append(kwargs)
        texts = [completion_text(c) for c in completions]  # TRL's conversational form
        return [None if t == "?" else (0.0 if t.startswith("good") else 1.0) for t in texts]

    reward, callback = trl_guard(
        guard, judge, lambda key, code: code.startswith("good"), key="task", action=action
    )
    assert reward.__name__ == "judge"
    state, control = tc.TrainerState(), tc.TrainerControl()

    class Args:  # the one GRPOConfig field the callback reads
        num_generations = 4

    callback.on_train_begin(Args(), state, control)
    logged: list[tuple[str, float]] = []
    prompts = ["same prompt"] * 8  # two groups of one prompt: split by num_generations
    answers = ["good a", "bad a", "good b", "bad b", "good c", "bad c", "?", "bad d"]
    completions = [[{"role": "assistant", "content": a}] for a in answers]
    for step in range(3):
        state.global_step = step
        out = reward(prompts, completions, task=["t"] * 8, trainer_state=state,
                     log_metric=lambda n, v: logged.append((n, v)))  # fmt: skip
        assert out == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, None, 1.0]
        state.global_step = step + 1
        callback.on_step_end(Args(), state, control)
        if guard.fired:
            break
    assert seen[0]["task"] == ["t"] * 8 and "trainer_state" in seen[0]
    status = guard.status()
    assert status.groups == 2 * (step + 1) and status.unscored == step + 1
    assert status.fired and status.fired_at_step == 1  # 3 groups of a 2/2 split (test_guard)
    assert ("guard/fired", 1.0) in logged and any(n == "guard/evalue" for n, _ in logged)
    assert control.should_training_stop is (action == "stop")
    assert callback.stopped_at == (2 if action == "stop" else None)
    with pytest.raises(ValueError, match="action"):
        trl_guard(guard, judge, action="halt")
    assert completion_text("plain") == "plain"
