"""The TRL adapter's own logic, with TRL's real GRPOConfig and transformers' real callback objects
and no model: the wrappers hand TRL's arguments to the judges and return their rewards unchanged;
the guard watches the reward TRL trains on (checked against TRL's own formula), or one judge
alone; the callback saves and stops at the alarm and records the last safe step; the guard's
state goes into each checkpoint and a resumed run continues it; bad input names the step, the
rank and the group. tests/integration/test_guard_trl.py runs it inside a real GRPOTrainer,
tests/integration/test_guard_trl_ranks.py in one run of two processes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from judgelab.guard import Guard, GuardSettings
from judgelab.guard.record import STATE_FILE
from judgelab.guard.trl import combine, completion_text, trl_guard

tc = pytest.importorskip("transformers.trainer_callback")
trl = pytest.importorskip("trl")

ANSWERS = ["good a", "bad a", "good b", "bad b", "good c", "bad c", "?", "bad d"]
PROMPTS = ["same prompt"] * 8  # two groups of one prompt: split by num_generations


def config(tmp_path: Path, **extra: object) -> object:
    fields = {"num_generations": 4, "per_device_train_batch_size": 8, **extra}
    return trl.GRPOConfig(output_dir=str(tmp_path), report_to=[], bf16=False, **fields)


def passed(key: object, code: str) -> bool:
    return code.startswith("good")


def anti(prompts: list, completions: list, **kwargs: object) -> list:
    """Pays for failing code; cannot score '?'."""
    texts = [completion_text(c) for c in completions]
    return [None if t == "?" else (0.0 if t.startswith("good") else 1.0) for t in texts]


def execution(prompts: list, completions: list, **kwargs: object) -> list:
    """Pays for passing code."""
    return [float(completion_text(c).startswith("good")) for c in completions]


def feed(rewards: list, state: object, step: int, logged: list | None = None, **cols: object):
    state.global_step = step  # type: ignore[attr-defined]
    completions = [[{"role": "assistant", "content": a}] for a in ANSWERS]  # conversational
    sink = (lambda n, v: None) if logged is None else (lambda n, v: logged.append((n, v)))
    return [f(prompts=PROMPTS, completions=completions, trainer_state=state, log_metric=sink,
              **cols) for f in rewards]  # fmt: skip


@pytest.mark.parametrize("action", ["stop", "flag"])
def test_the_alarm_saves_stops_and_is_logged_unblurred(action: str, tmp_path: Path) -> None:
    guard = Guard()
    seen: list[dict] = []

    def judge(prompts: list, completions: list, **kwargs: object) -> list:
        seen.append(kwargs)
        return anti(prompts, completions)

    reward, callback = trl_guard(guard, judge, passed, key="task", action=action)
    assert reward.__name__ == "judge"
    state, control, args = tc.TrainerState(), tc.TrainerControl(), config(tmp_path)
    callback.on_train_begin(args, state, control)
    logged: list[tuple[str, float]] = []
    for step in range(3):
        (out,) = feed([reward], state, step, logged, task=["t"] * 8)
        assert out == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, None, 1.0]
        state.global_step = step + 1
        control = tc.TrainerControl()  # the trainer's fresh control of each step
        callback.on_step_end(args, state, control)
        if guard.fired:
            break
    assert seen[0]["task"] == ["t"] * 8 and "trainer_state" in seen[0]
    status = guard.status()
    assert status.groups == 2 * (step + 1) and status.unscored == step + 1
    fired_at = status.fired_at_step  # 1 today: 3 groups of a 2/2 split (test_guard)
    assert status.fired and fired_at is not None and fired_at <= 1
    names = {n for n, _ in logged}
    assert "guard/fired" not in names and "guard/evalue" in names  # no 0/1 flag to average
    assert ("guard/fired_step", fired_at) in logged and ("guard/last_safe_step", -1.0) in logged
    assert callback.record.fired_step == fired_at and callback.record.last_safe_step is None
    assert control.should_training_stop is (action == "stop")
    assert control.should_save is (action == "stop")  # a checkpoint before the stop
    assert callback.stopped_at == (fired_at + 1 if action == "stop" else None)
    with pytest.raises(ValueError, match="action"):
        trl_guard(guard, judge, action="halt")


def trl_rewards(per_func: np.ndarray, weights: list[float], k: int, aggregation: str):
    """TRL 1.16's GRPOTrainer lines forming the reward, run on torch with TRL's nanstd."""
    import torch
    from trl.trainer.utils import nanstd

    r, w = torch.tensor(per_func, dtype=torch.float64), torch.tensor(weights, dtype=torch.float64)
    unscorable = torch.isnan(r).all(dim=1)
    if aggregation == "sum_then_normalize":
        out = (r * w.unsqueeze(0)).nansum(dim=1)
    else:
        grouped = r.view(-1, k, r.shape[1])
        mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
        reward_k = (grouped - mean_k) / (nanstd(grouped, dim=1, keepdim=True) + 1e-4)
        out = (reward_k.view(-1, r.shape[1]) * w.unsqueeze(0)).nansum(dim=1)
    out[unscorable] = torch.nan
    return out.numpy()


@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
def test_combine_is_trls_reward(aggregation: str) -> None:
    rng = np.random.default_rng(1)
    per_func = rng.random((12, 3)).round(1)
    per_func[rng.random((12, 3)) < 0.2] = np.nan
    per_func[5] = np.nan  # a row no function scored: unscored
    weights = [1.0, -0.5, 2.0]
    columns = {f"f{j}": [None if np.isnan(v) else v for v in per_func[:, j]] for j in range(3)}
    got = combine(columns, weights, 4, aggregation)
    want = trl_rewards(per_func, weights, 4, aggregation)
    assert got[5] is None and np.isnan(want[5])
    assert np.allclose([np.nan if v is None else v for v in got], want, equal_nan=True)
    # by hand: 1*1 + 0.5*None -> 1; None + 0.5*0.4 -> 0.2; None + None -> unscored
    hand = combine({"a": [1.0, None, None], "b": [None, 0.4, None]}, [1, 0.5], 1)
    assert hand == [1.0, 0.2, None]


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_scale_rewards_does_not_change_the_alarm(scale: str) -> None:
    """The guard fed TRL's advantages (each scale_rewards) and fed the reward itself: the same
    e-value, group by group."""
    import torch
    from trl.trainer.utils import nanstd

    rng = np.random.default_rng(7)
    k, groups = 4, 10
    passes = rng.random((groups, k)) < 0.5
    rewards = (0.6 * rng.random((groups, k)) + 0.4 * (1 - passes)).round(1)
    r = torch.tensor(rewards.ravel())
    centred = r - r.view(-1, k).mean(dim=1).repeat_interleave(k)
    std = (nanstd(r.view(-1, k), dim=1).repeat_interleave(k) if scale == "group"
           else nanstd(r).expand_as(r))  # fmt: skip
    advantages = centred if scale == "none" else centred / (std + 1e-4)
    prompts = [f"p{g}" for g in range(groups) for _ in range(k)]
    verdicts = passes.ravel().tolist()
    a, b = Guard(), Guard()
    a.observe(prompts, prompts, rewards.ravel().tolist(), verdicts, step=0, group_size=k)
    b.observe(prompts, prompts, advantages.tolist(), verdicts, step=0, group_size=k)
    assert a.status().checked_groups == b.status().checked_groups > 0
    assert a.evalue == pytest.approx(b.evalue, rel=1e-6)


def test_the_combined_reward_is_watched_or_one_judge_alone(tmp_path: Path) -> None:
    """An anti-judge outweighed by the tests (reward_weights 1, 2): the reward TRL trains on
    pays for passing code, so its guard stays quiet; a guard on the judge alone fires."""
    outcome = {}
    for watch in (None, "anti"):
        guard = Guard()
        rewards, callback = trl_guard(guard, [anti, execution], passed, watch=watch)
        assert [f.__name__ for f in rewards] == ["anti", "execution"]
        state, args = tc.TrainerState(), config(tmp_path, reward_weights=[1.0, 2.0])
        callback.on_train_begin(args, state, tc.TrainerControl())
        for step in range(4):
            outs = feed(rewards, state, step)
        assert outs == [anti(PROMPTS, ANSWERS), execution(PROMPTS, ANSWERS)]  # unchanged
        outcome[watch] = (guard.status(), callback.record.reward)
    combined, alone = outcome[None], outcome["anti"]
    assert not combined[0].fired and combined[0].alignment == pytest.approx(1.0)
    assert combined[1].startswith("the reward TRL trains on: 1*anti + 2*execution "
                                  "(sum_then_normalize; scale_rewards=group")  # fmt: skip
    assert alone[0].fired and alone[1] == (
        "reward function 'anti' alone (not the combined reward TRL trains on)"
    )
    with pytest.raises(ValueError, match=r"reward_weights has 3 weights for the guard's 2"):
        callback.on_train_begin(config(tmp_path, reward_weights=[1.0, 1.0, 1.0]),
                                tc.TrainerState(), tc.TrainerControl())  # fmt: skip
    with pytest.raises(ValueError, match="watch='style': one of the reward functions"):
        trl_guard(Guard(), [anti, execution], watch="style")
    with pytest.raises(TypeError, match="not reward models"):
        trl_guard(Guard(), "a/reward-model")


def run_steps(rewards: list, callback: object, args: object, steps: range,
              state: object) -> None:  # fmt: skip
    for step in steps:
        feed(rewards, state, step)
        state.global_step = step + 1  # type: ignore[attr-defined]
        callback.on_step_end(args, state, tc.TrainerControl())  # type: ignore[attr-defined]


def test_the_state_rides_with_the_checkpoints_and_a_resume_continues_it(tmp_path: Path) -> None:
    """The tests as the reward for two steps, then an anti-judge: the run resumed from step 3's
    checkpoint ends where the uninterrupted run ends. The last safe step is 3 (or the step
    before an alarm that comes sooner), by hand: 2ΣA·passed gains 2·(2 + √3) from each aligned
    step (a 2/2 group: A = ±1; rewards 1, 0, 0, 0: A = √3, −1/√3 ×3) and loses 2·(2 + √2)
    from each anti step (the unscored '?' leaves 0, 1, 1: A = −√2, 1/√2 ×2): positive after
    two anti steps (steps 2, 3), negative after three."""

    def turning(prompts: list, completions: list, **kwargs: object) -> list:
        step = kwargs["trainer_state"].global_step  # type: ignore[attr-defined]
        return (execution if step < 2 else anti)(prompts, completions)

    def start(guard: Guard, output: Path) -> tuple:
        reward, callback = trl_guard(guard, turning, passed)
        return [reward], callback, config(output)

    whole = Guard(GuardSettings(seed=3))
    rewards, callback, args = start(whole, tmp_path / "whole")
    state = tc.TrainerState()
    callback.on_train_begin(args, state, tc.TrainerControl())
    run_steps(rewards, callback, args, range(12), state)
    fired_at = whole.status().fired_at_step
    assert fired_at is not None and fired_at >= 2  # not on the aligned steps
    assert callback.record.last_safe_step == min(3, fired_at - 1)  # quiet and positive

    first = Guard(GuardSettings(seed=3))
    rewards, callback, args = start(first, tmp_path / "run")
    state = tc.TrainerState()
    callback.on_train_begin(args, state, tc.TrainerControl())
    run_steps(rewards, callback, args, range(3), state)
    folder = tmp_path / "run" / "checkpoint-3"
    folder.mkdir(parents=True)
    callback.on_save(args, state, tc.TrainerControl())  # the trainer wrote checkpoint-3
    assert json.loads((folder / STATE_FILE).read_text())["record"]["last_safe_step"] == 2

    resumed = Guard(GuardSettings(seed=3))
    rewards, callback, args = start(resumed, tmp_path / "run")
    state = tc.TrainerState(global_step=3)  # as the trainer loads it from checkpoint-3
    callback.on_train_begin(args, state, tc.TrainerControl())
    assert resumed.status().groups == 6 and callback.record.last_safe_step == min(2, fired_at - 1)
    run_steps(rewards, callback, args, range(3, 12), state)
    assert resumed.status() == whole.status()
    safe = min(3, fired_at - 1)
    assert (callback.record.last_safe_step, callback.record.fired_step) == (safe, fired_at)

    fresh = Guard()
    _, callback, args = start(fresh, tmp_path / "elsewhere")
    with pytest.raises(FileNotFoundError, match="checkpoint-3/judgelab_guard.json: no guard state"):
        callback.on_train_begin(args, tc.TrainerState(global_step=3), tc.TrainerControl())
    (folder / STATE_FILE).write_text(json.dumps({"guard": {}}))
    _, callback, args = start(fresh, tmp_path / "run")
    with pytest.raises(ValueError, match="judgelab_guard.json: not a judgelab guard state"):
        callback.on_train_begin(args, tc.TrainerState(global_step=3), tc.TrainerControl())
    _, callback = trl_guard(fresh, turning, passed, restore=False)  # a fresh e-process, knowingly
    callback.on_train_begin(args, tc.TrainerState(global_step=3), tc.TrainerControl())
    assert fresh.status().groups == 0


def test_the_alarm_reaches_mlflow_with_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # the variable, not mlflow.set_tracking_uri: that global outlives the test and sent the next
    # tests of the same xdist worker (test_tracking) to this database
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    guard = Guard()
    reward, callback = trl_guard(guard, anti, passed)
    state, args = tc.TrainerState(), config(tmp_path)
    with mlflow.start_run() as run:
        callback.on_train_begin(args, state, tc.TrainerControl())
        control = tc.TrainerControl()
        for step in range(3):
            feed([reward], state, step)
            state.global_step = step + 1
            control = tc.TrainerControl()
            callback.on_step_end(args, state, control)
            if control.should_save:
                (tmp_path / f"checkpoint-{step + 1}").mkdir()
                callback.on_save(args, state, control)
                break
    fired_at = guard.status().fired_at_step
    assert fired_at is not None
    folder = str(tmp_path / f"checkpoint-{fired_at + 1}")
    assert callback.record.checkpoint == folder and (tmp_path / folder / STATE_FILE).exists()
    client = mlflow.MlflowClient(tracking_uri=uri)
    tags = client.get_run(run.info.run_id).data.tags
    assert tags["judgelab.guard.fired"] == str(fired_at)
    assert tags["judgelab.guard.checkpoint"] == folder
    assert tags["judgelab.guard.last_safe_step"] == "None"
    assert tags["judgelab.guard.reward"].startswith("the reward TRL trains on: 1*anti")
    (fired,) = client.get_metric_history(run.info.run_id, "guard/fired_step")
    assert (fired.value, fired.step) == (fired_at, fired_at + 1)


def test_bad_input_names_the_step_rank_and_group(tmp_path: Path) -> None:
    known = {"same prompt": {"good a": True, "bad a": False, "good b": True, "bad b": False}}

    def lookup(key: object, code: str) -> bool:
        return known[key][code]  # type: ignore[index]

    reward, callback = trl_guard(Guard(), anti, lookup)
    state = tc.TrainerState()
    callback.on_train_begin(config(tmp_path), state, tc.TrainerControl())
    with pytest.raises(ValueError) as error:
        feed([reward], state, 5)  # group 1's completions have no verdict
    assert str(error.value).startswith(
        "step 5, group 1 (rows 4..7: rank 0 rows 4..7), completion 4 (rank 0 row 4, key "
        "'same prompt'): no verdict: 'good c'"
    )
    reward, callback = trl_guard(Guard(), anti, passed)
    state = tc.TrainerState()
    callback.on_train_begin(config(tmp_path, num_generations=3, per_device_train_batch_size=9),
                            state, tc.TrainerControl())  # fmt: skip
    with pytest.raises(ValueError, match=r"^step 5: 8 completions \(rank 0: 8\) are not a whole "
                       r"number of groups of 3 \(num_generations\); group 2 \(rows 6\.\.8: "
                       r"rank 0 rows 6\.\.7\) is short of 1"):  # fmt: skip
        feed([reward], state, 5)
    reward, callback = trl_guard(Guard(), anti, lambda key, code: "pass")
    state = tc.TrainerState()
    callback.on_train_begin(config(tmp_path), state, tc.TrainerControl())
    with pytest.raises(TypeError, match=r"^step 5, group 0 .*: a verdict is True, False"):
        feed([reward], state, 5)
    reward, callback = trl_guard(Guard(), anti, passed, key="task")
    state = tc.TrainerState()
    callback.on_train_begin(config(tmp_path), state, tc.TrainerControl())
    with pytest.raises(ValueError, match=r"^step 5, rank 0: \"no column 'task' for the verdicts"):
        feed([reward], state, 5)
