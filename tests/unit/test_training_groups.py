"""Training groups chosen as the held-out tasks are (`train.select: mixed`), their draws made
once, and samples drawn by another engine (llama.cpp) trained on with the torch policy's
log-probabilities. The policy is test_training_seeds' stand-in (8 tokens, 'tests' pass an
even token): this is about our loop's choice and bookkeeping, not a model's behaviour."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from judgelab.cache import JsonCache
from judgelab.config import HumanEvalSettings, RolloutSettings
from judgelab.errors import ConfigError
from judgelab.rollouts.generate import sample_seed
from judgelab.tasks.humaneval import load_humaneval
from judgelab.training.grpo import Trajectory
from judgelab.training.policy import Sample
from judgelab.training.round import RewardRun
from judgelab.training.sampler import Request, Sampler
from judgelab.training.trainer import Trainer, behaviour_logprobs
from tests.unit.test_sampler_cache import CountingPolicy
from tests.unit.test_training_seeds import (
    BASE_LOGITS,
    SETTINGS,
    EvenTokenTests,
    StandInPolicy,
    TokenJudge,
)

MIXED = SETTINGS.model_copy(update={"select": "mixed", "epochs": 2, "groups_per_epoch": 2})


def trainer(tmp_path: Path, log: dict, settings: object = MIXED, n_tasks: int = 12) -> Trainer:
    return Trainer(
        runs=[RewardRun("a", TokenJudge(), tmp_path / "a")],
        settings=settings,  # type: ignore[arg-type]
        rollout=RolloutSettings(),
        tasks=load_humaneval(HumanEvalSettings(offset=0, limit=n_tasks)),
        heldout=load_humaneval(HumanEvalSettings(offset=100, limit=2)),
        cache=JsonCache(tmp_path / "c", "samples"),
        executor=EvenTokenTests(),
        policy_factory=lambda adapters: StandInPolicy(adapters, log),  # type: ignore[arg-type,return-value]
        groups_file=tmp_path / "groups.json",
    )


def test_training_groups_are_the_base_policys_mixed_tasks_and_every_epoch_steps(
    tmp_path: Path,
) -> None:
    """The chosen tasks' base pass rates (on the screening draws) are strictly between 0 and
    1, and they are the pass rates of epoch 0's training samples: epoch 0 trains on the very
    draws that chose them, drawn once. Every epoch but the last (scored, never trained on)
    steps, on groups with reward spread."""
    log: dict = {}
    history = trainer(tmp_path, log).run()["a"]
    body = json.loads((tmp_path / "groups.json").read_text())
    need = MIXED.epochs * MIXED.groups_per_epoch
    assert len(body["train"]) == need and body["filled"] == []
    assert all(0 < body["base_pass_rate"][t] < 1 for t in body["train"])
    # screened in order, a batch of `need` at a time, and no further than needed
    screened = body["screened"]
    assert screened == [f"HumanEval/{i}" for i in range(len(screened))]
    assert len(screened) % need == 0 or len(screened) == 12
    epoch0 = [s for s in history[0]["records"] if s["split"] == "train"]
    for task in body["train"][: MIXED.groups_per_epoch]:
        passed = [s["passed"] for s in epoch0 if s["task_id"] == task]
        assert sum(passed) / len(passed) == body["base_pass_rate"][task]
    seeds = Counter(seed for _, seed in log["draws"])
    for task in body["train"][: MIXED.groups_per_epoch]:
        for i in range(MIXED.k):
            assert seeds[sample_seed(MIXED.seed, f"train|0|{task}", i)] == 1  # drawn once
    assert [r["epoch"] for r in history] == [0, 1, 2]
    assert [r["loss"] is not None for r in history] == [True, True, False]
    assert history[0]["groups_skipped"] == 0


def test_too_few_mixed_tasks_fill_up_closest_to_one_half(tmp_path: Path) -> None:
    """One training task outside the pool: chosen whatever its rate (named as filled in
    when it is not mixed); a table whose tasks are all held out is refused."""
    log: dict = {}
    t = trainer(tmp_path, log, n_tasks=1)
    t.run()
    body = json.loads((tmp_path / "groups.json").read_text())
    assert body["train"] == ["HumanEval/0"] and body["screened"] == ["HumanEval/0"]
    mixed = 0 < body["base_pass_rate"]["HumanEval/0"] < 1
    assert body["filled"] == ([] if mixed else ["HumanEval/0"])
    with pytest.raises(ConfigError, match="every task with tests is held out"):
        Trainer(
            runs=[RewardRun("a", TokenJudge(), tmp_path / "b")],
            settings=MIXED,
            rollout=RolloutSettings(),
            tasks=load_humaneval(HumanEvalSettings(offset=100, limit=1)),
            heldout=load_humaneval(HumanEvalSettings(offset=100, limit=2)),
            cache=JsonCache(tmp_path / "c", "samples"),
            executor=EvenTokenTests(),
            policy_factory=lambda adapters: StandInPolicy(adapters, log),  # type: ignore[arg-type,return-value]
            groups_file=tmp_path / "g.json",
        )


def test_behaviour_logprobs_are_the_policys_own_where_missing() -> None:
    """A sample drawn without log-probabilities (llama.cpp) gets the active adapter's, at the
    sampling temperature, computed by hand here from the stand-in's logits; a sample that has
    them keeps them."""
    policy = StandInPolicy({"a": None}, {})
    with torch.no_grad():
        policy.weights["a"]["m.lora_B.weight"].fill_(0.3)
    temperature = 0.7
    drawn = Trajectory([1, 2], [3, 6], [], 1.0, 0)
    kept = Trajectory([1, 2], [5], [-9.0], -1.0, 0)
    other_prompt = Trajectory([4], [0], [], 0.5, 1)
    out = behaviour_logprobs(policy, [drawn, kept, other_prompt], temperature)  # type: ignore[arg-type]
    logits = BASE_LOGITS + torch.full((4, 4), 0.3 * 2).flatten()[:8]  # B @ A, A = 1 (r = 2)
    logp = torch.log_softmax(logits / temperature, dim=-1)
    assert out[0].logprobs == pytest.approx([float(logp[3]), float(logp[6])], abs=1e-6)
    assert out[1].logprobs == [-9.0]
    assert out[2].logprobs == pytest.approx([float(logp[0])], abs=1e-6)


class FakeEngine:
    """Draws every row as token 5, without log-probabilities, as llama.cpp's sampler does."""

    key = {"engine": "fake", "version": 1}

    def __init__(self) -> None:
        self.drawn = 0

    def sample(self, prompts: list, **kw: list) -> list[Sample]:
        self.drawn += len(prompts)
        return [Sample([5], [], "engine", "stop") for _ in prompts]


def test_an_engines_rows_are_cached_under_its_own_key(tmp_path: Path) -> None:
    """Rows an engine drew are its own (never the torch decode's, nor another dtype's
    engine-free rows), and are reused whatever the torch policy's dtype: the engine's
    draws do not depend on it."""
    cache = JsonCache(tmp_path, "samples")
    request = [Request("a", [{"role": "user", "content": "x"}], (1, 2), 1.0, 8)]
    engine = FakeEngine()
    for dtype in ("float32", "bfloat16"):
        policy = CountingPolicy(dtype, "cpu")
        (rows,) = Sampler(policy, cache, engine).round(request, {"a": "h"})  # type: ignore[arg-type]
        assert {s.text for s in rows} == {"engine"} and policy.drawn == 0
    assert engine.drawn == 2  # the second dtype's round came from the cache
    policy = CountingPolicy("float32", "cpu")
    (rows,) = Sampler(policy, cache).round(request, {"a": "h"})  # type: ignore[arg-type]
    assert {s.text for s in rows} == {"float32"} and policy.drawn == 2


class DelegatingEngine:
    """Draws as the stand-in policy does, but returns no log-probabilities (as llama.cpp's
    sampler): the trainer must compute them before each step."""

    key = {"engine": "delegating", "version": 1}

    def __init__(self, policy: StandInPolicy) -> None:
        self.policy, self.rows = policy, 0

    def sample(self, prompts: list, **kw: list) -> list[Sample]:
        self.rows += len(prompts)
        drawn = self.policy.sample(prompts, **kw)  # type: ignore[arg-type]
        return [Sample(s.token_ids, [], s.text, s.finish_reason) for s in drawn]


def test_the_loop_trains_on_an_engines_samples(tmp_path: Path) -> None:
    """Every row of the run comes from the engine, and the steps still happen, on-policy:
    the first step's importance ratio is 1 (the behaviour log-probabilities are the torch
    policy's own, computed just before it)."""
    engines: list[DelegatingEngine] = []

    def engine(policy: StandInPolicy) -> DelegatingEngine:
        engines.append(DelegatingEngine(policy))
        return engines[-1]

    t = trainer(tmp_path, {})
    t.engine_factory = engine  # type: ignore[assignment]
    history = t.run()["a"]
    assert len(engines) == 1 and engines[0].rows > 0
    assert [r["loss"] is not None for r in history] == [True, True, False]
    assert history[0]["ratio_mean"] == pytest.approx(1.0, abs=1e-6)
