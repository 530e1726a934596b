"""The first-order training effect (`training.first_order`) against independent computations
on a tiny random model (built from a config in code: no download): the bank's gradient and
each sample's slope against autograd on plain unpadded forwards, and the predicted effect
against an actual GRPO step of plain SGD."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from judgelab.advantage import group_advantages
from judgelab.config import LossSettings
from judgelab.training.effect import Bank, BankItem, bank_logprobs, effect
from judgelab.training.first_order import (
    bank_gradient,
    bank_weights,
    directional_slopes,
    group_terms,
)
from judgelab.training.grpo import Trajectory, grpo_step

BANK = Bank([
    BankItem("a", [3, 4, 5], [6, 7], True),
    BankItem("a", [3, 4, 5], [9, 10, 11, 12], False),
    BankItem("a", [3, 4, 5], [9, 2, 2, 6, 5], False),
    BankItem("b", [8, 1], [1, 4], True),
    BankItem("b", [8, 1], [2], False),
    BankItem("c", [7], [3, 3], True),  # no failing sample: no contrast, weight 0
])  # fmt: skip


class _Tiny:
    """Test-only: a tiny random Qwen2, every parameter trainable, with Policy's forward."""

    def __init__(self) -> None:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        torch.manual_seed(0)
        config = Qwen2Config(vocab_size=24, hidden_size=16, intermediate_size=32,
                             num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                             max_position_embeddings=64)  # fmt: skip
        self.model, self.pad_id, self.device = Qwen2ForCausalLM(config).eval(), 0, "cpu"

    def trainable(self) -> list[torch.nn.Parameter]:
        return list(self.model.parameters())

    def sequence_logprobs(self, *args: object, **kwargs: object) -> torch.Tensor:
        from judgelab.training.policy import Policy

        return Policy.sequence_logprobs(self, *args, **kwargs)  # type: ignore[arg-type]


def _mean_logprob(model: torch.nn.Module, item: BankItem, temperature: float = 1.0) -> torch.Tensor:
    """Independent: one unpadded forward of prompt + completion, differentiable."""
    ids = torch.tensor([item.prompt_ids + item.completion_ids])
    logp = torch.log_softmax(model(input_ids=ids).logits[0].float() / temperature, -1)
    p = len(item.prompt_ids)
    picked = [logp[p - 1 + j, t] for j, t in enumerate(item.completion_ids)]
    return torch.stack(picked).mean()


def test_bank_weights_give_the_effect() -> None:
    rng = np.random.default_rng(0)
    before, after = rng.normal(size=6), rng.normal(size=6)
    c = bank_weights(BANK)
    assert c[5] == 0.0 and sum(c) == pytest.approx(0.0)
    value, n = effect(before, after, BANK)
    assert n == 2 and float(np.dot(c, after - before)) == pytest.approx(value)


def test_gradient_and_slopes_match_autograd_on_plain_forwards() -> None:
    tiny = _Tiny()
    params = tiny.trainable()
    value, grad = bank_gradient(tiny.model, BANK, tiny.pad_id, params, batch=2)
    pairs = zip(bank_weights(BANK), BANK.items, strict=True)
    f = sum(w * _mean_logprob(tiny.model, i) for w, i in pairs)
    exact = torch.autograd.grad(f, params)
    assert value == pytest.approx(float(f.detach()), abs=1e-5)
    for got, want in zip(grad, exact, strict=True):
        assert torch.allclose(got, want, atol=1e-6, rtol=1e-4)
    assert all(p.grad is None for p in params)

    samples = [BankItem("t", [1, 2], [5, 6, 7], True), BankItem("t", [1, 2], [8], False),
               BankItem("u", [4], [9, 9, 3, 2], True)]  # fmt: skip
    before = [p.detach().clone() for p in params]
    slopes = directional_slopes(tiny.model, samples, tiny.pad_id, params, grad, 1e-2, 0.7)
    assert all(torch.equal(p, q) for p, q in zip(params, before, strict=True))  # restored
    for item, slope in zip(samples, slopes, strict=True):
        g = torch.autograd.grad(_mean_logprob(tiny.model, item, 0.7), params)
        want = float(sum((a * b).sum() for a, b in zip(g, exact, strict=True)))
        assert slope == pytest.approx(want, rel=2e-2, abs=1e-6)
        assert abs(want) > 1e-4  # the check is not 0 = 0


def test_group_terms_by_hand() -> None:
    adv = group_advantages([1.0, 0.0, 0.0, 1.0])  # ±1 (std 0.5)
    n, d = group_terms([0.5, -1.0, 2.0, 1.5], [1.0, 0.0, 0.0, 1.0])
    assert adv == pytest.approx([1, -1, -1, 1], abs=1e-5)
    assert n == pytest.approx(0.5 + 1.0 - 2.0 + 1.5, abs=1e-5) and d == pytest.approx(4, abs=1e-5)
    assert group_terms([1.0, 2.0], [1.0, 1.0]) == (0.0, 0.0)  # no spread: no step
    # an unscored candidate leaves the group's statistics: the other two are ±1
    n, d = group_terms([3.0, 1.0, 7.0], [1.0, 0.0, None])
    assert n == pytest.approx(2.0, abs=1e-5) and d == pytest.approx(2.0, abs=1e-5)


def test_first_order_effect_predicts_an_sgd_grpo_step() -> None:
    """η Σ A s / Σ |A| against F after one real `grpo_step` (ART's loss, plain SGD, no clip)
    from the same parameters: the derivation's normalisation and sign, not only the slopes."""
    groups = [
        (BankItem("g0", [1, 2, 3], [4, 5], True), [1.0, 0.0, 1.0]),
        (BankItem("g1", [6, 2], [7, 8, 9], True), [0.0, 1.0, 0.5]),
    ]
    comps = {"g0": [[4, 5], [9, 9, 9, 2], [3]], "g1": [[7, 8, 9], [10], [11, 4]]}
    tiny = _Tiny()
    params, temperature = tiny.trainable(), 1.0
    _, grad = bank_gradient(tiny.model, BANK, tiny.pad_id, params)
    n_sum = d_sum = 0.0
    trajectories = []
    for g, (head, rewards) in enumerate(groups):
        items = [BankItem(head.task_id, head.prompt_ids, c, True) for c in comps[head.task_id]]
        slopes = directional_slopes(tiny.model, items, tiny.pad_id, params, grad, 1e-2)
        n, d = group_terms(slopes, rewards)
        n_sum, d_sum = n_sum + n, d_sum + d
        for item, adv in zip(items, group_advantages(rewards), strict=True):
            with torch.no_grad():
                lp = _mean_logprob(tiny.model, item)  # only for the ratio's old log-probs
                ids = torch.tensor([item.prompt_ids + item.completion_ids])
                all_lp = torch.log_softmax(tiny.model(input_ids=ids).logits[0], -1)
            old = [float(all_lp[len(item.prompt_ids) - 1 + j, t])
                   for j, t in enumerate(item.completion_ids)]  # fmt: skip
            assert np.mean(old) == pytest.approx(float(lp), abs=1e-5)
            trajectories.append(Trajectory(item.prompt_ids, item.completion_ids, old, adv, g))
    lr = 1e-3
    predicted = lr * n_sum / d_sum
    before = bank_logprobs(tiny.model, BANK.items, tiny.pad_id)
    opt = torch.optim.SGD(params, lr=lr)
    grpo_step(tiny, opt, trajectories, LossSettings(), max_grad_norm=1e9, temperature=temperature)
    after = bank_logprobs(tiny.model, BANK.items, tiny.pad_id)
    measured, _ = effect(before, after, BANK)
    assert abs(predicted) > 1e-6
    assert measured == pytest.approx(predicted, rel=0.05)


def test_the_study_runs_in_float32_whatever_train_dtype_says(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """bfloat16 loses the study's effects (bench/first_order_precision.py): `auto`, which picks
    bfloat16 on CUDA and bf16-native CPUs, and an explicit bfloat16 both give float32, the
    latter with a warning that names the setting."""
    from judgelab.config import TrainSettings
    from judgelab.training.study import study_dtype

    for setting in ("auto", "float32"):
        assert study_dtype(TrainSettings(dtype=setting)) == "float32"
    assert not caplog.records
    assert study_dtype(TrainSettings(dtype="bfloat16")) == "float32"
    assert "train.dtype bfloat16" in caplog.text
