"""GRPO on a real embedded model (SmolLM2-135M, the smallest in the zoo), on CPU.

The judge here is a deterministic test evaluator (reward from the completion's character
variety): these tests are about our training loop, not about any judge.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from judgelab.cache import JsonCache
from judgelab.config import (
    ExecutionEvaluator,
    FormatEvaluator,
    HeldOutSettings,
    HumanEvalSettings,
    LoraSettings,
    LossSettings,
    RolloutSettings,
    TrainSettings,
)
from judgelab.evaluators.base import Candidate, Task, Verdict
from judgelab.evaluators.execution import ExecutionJudge
from judgelab.tasks.humaneval import load_humaneval
from judgelab.training.grpo import Trajectory, grpo_step
from judgelab.training.loop import Trainer, latest_checkpoint
from judgelab.training.policy import Policy

ZOO = "smollm2-135m-instruct"
LORA = LoraSettings(r=4, alpha=8)


@pytest.fixture(scope="module")
def policy() -> Policy:
    torch.manual_seed(0)
    return Policy(ZOO, LORA, "cpu", dtype="float32")


def test_one_grpo_step_moves_every_lora_parameter_and_no_base_weight(policy: Policy) -> None:
    prompt = policy.prompt_ids([{"role": "user", "content": "Write a Python add function."}])
    samples = policy.sample(
        [prompt, prompt], temperatures=[1.0, 1.0], max_new_tokens=[12, 12], seed=0
    )
    assert all(len(s.token_ids) == len(s.logprobs) > 0 for s in samples)
    trajs = [
        Trajectory(prompt, s.token_ids, s.logprobs, adv, 0)
        for s, adv in zip(samples, [1.0, -1.0], strict=True)
    ]
    lora0 = {n: p.detach().clone() for n, p in policy.lora_parameters().items()}
    base0 = {n: p.detach().clone() for n, p in policy.base_parameters().items()}
    assert lora0 and base0
    assert all(not p.requires_grad for p in policy.base_parameters().values())
    opt = torch.optim.AdamW(policy.trainable(), lr=1e-3, weight_decay=0.0)

    first = grpo_step(policy, opt, trajs, LossSettings(), max_grad_norm=1.0)
    # The sampler's log-probabilities are the policy's own: on-policy ratio 1.
    assert first.ratio_mean == pytest.approx(1.0, abs=1e-3)
    assert first.grad_norm > 0 and first.tokens == sum(len(s.token_ids) for s in samples)
    moved = {n for n, p in policy.lora_parameters().items() if not torch.equal(p, lora0[n])}
    # LoRA starts with B = 0, so on the very first step dL/dA = 0 exactly: only B moves.
    assert moved == {n for n in lora0 if "lora_B" in n}

    grpo_step(policy, opt, trajs, LossSettings(), max_grad_norm=1.0)
    unchanged = [n for n, p in policy.lora_parameters().items() if torch.equal(p, lora0[n])]
    assert unchanged == []
    changed_base = [n for n, p in policy.base_parameters().items() if not torch.equal(p, base0[n])]
    assert changed_base == []


class VarietyJudge:
    """Test-only pointwise evaluator; can be told to fail on its n-th call (a crash)."""

    protocol = "rule"

    def __init__(self, fail_on_call: int | None = None) -> None:
        self.name = "variety"
        self.calls = 0
        self.fail_on_call = fail_on_call

    def score(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        self.calls += 1
        if self.fail_on_call is not None and self.calls >= self.fail_on_call:
            raise RuntimeError("simulated crash")
        return Verdict.scored(min(1.0, len(set(candidate.completion)) / 30))


def _trainer(out: Path, cache: Path, judge: VarietyJudge) -> Trainer:
    settings = TrainSettings(
        epochs=3,
        k=2,
        max_tokens=16,
        learning_rate=1e-3,
        lora=LORA,
        heldout=HeldOutSettings(offset=100, limit=1, max_tokens=16),
    )
    return Trainer(
        judge_name="variety",
        judge=judge,
        spec=FormatEvaluator(name="variety"),
        settings=settings,
        rollout=RolloutSettings(),
        tasks=load_humaneval(HumanEvalSettings(offset=0, limit=2)),
        heldout=load_humaneval(HumanEvalSettings(offset=100, limit=1)),
        out_dir=out,
        cache=JsonCache(cache, "samples"),
        executor=ExecutionJudge(ExecutionEvaluator(name="execution")),
        policy_factory=lambda adapter: Policy(ZOO, LORA, "cpu", adapter, "bfloat16"),
    )


def test_interrupted_training_resumes_without_losing_or_repeating_an_epoch(
    tmp_path: Path,
) -> None:
    reference = _trainer(tmp_path / "ref", tmp_path / "cache-ref", VarietyJudge()).run()
    assert [r["epoch"] for r in reference] == [0, 1, 2, 3]
    assert sum(r["loss"] is not None for r in reference) >= 1  # it did train

    crashing = VarietyJudge(fail_on_call=5)  # 2 calls per epoch: dies inside epoch 2
    with pytest.raises(RuntimeError, match="simulated crash"):
        _trainer(tmp_path / "run", tmp_path / "cache-run", crashing).run()
    ckpt = latest_checkpoint(tmp_path / "run" / "checkpoints")
    assert ckpt is not None and ckpt.steps == 2 and not ckpt.done
    assert [r["epoch"] for r in ckpt.history] == [0, 1]

    resumed_judge = VarietyJudge()
    resumed = _trainer(tmp_path / "run", tmp_path / "cache-run", resumed_judge).run()
    assert resumed_judge.calls == 2 * 2  # only epochs 2 and 3 were scored again
    assert [r["epoch"] for r in resumed] == [0, 1, 2, 3]
    # Same adapters, same rewards, same losses as the run that was never interrupted.
    for got, want in zip(resumed, reference, strict=True):
        assert got["adapter"] == want["adapter"]
        assert got["reward_mean"] == pytest.approx(want["reward_mean"])
        assert (got["loss"] is None) == (want["loss"] is None)
        if want["loss"] is not None:
            assert got["loss"] == pytest.approx(want["loss"], rel=1e-4)
    # Finished: a further run does nothing.
    again = VarietyJudge()
    assert _trainer(tmp_path / "run", tmp_path / "cache-run", again).run() == resumed
    assert again.calls == 0
