"""The training effect on a bank: the arithmetic by hand, the log-probabilities against an
independent forward on a tiny random model (built from a config in code: no download)."""

from __future__ import annotations

import pytest
import torch

from judgelab.training.effect import Bank, BankItem, bank_logprobs, effect, task_effects


def _bank() -> Bank:
    return Bank([
        BankItem("a", [1], [2], True), BankItem("a", [1], [3], True),
        BankItem("a", [1], [4], False),
        BankItem("b", [1], [5], True), BankItem("b", [1], [6], False),
        BankItem("c", [1], [7], False), BankItem("c", [1], [8], False),  # no contrast
    ])  # fmt: skip


def test_effect_by_hand() -> None:
    bank = _bank()
    before = [0.0] * 7
    after = [0.3, 0.1, -0.2, 0.0, 0.5, 9.0, -9.0]
    # a: mean(0.3, 0.1) - (-0.2) = 0.4; b: 0.0 - 0.5 = -0.5; c: no passing sample
    per_task = task_effects(after, [i.task_id for i in bank.items], [i.passed for i in bank.items])
    assert per_task == pytest.approx({"a": 0.4, "b": -0.5})
    value, n = effect(before, after, bank)
    assert n == 2 and value == pytest.approx(-0.05)
    assert bank.contrast_tasks == ["a", "b"]
    assert effect(before, before, bank) == (0.0, 2)
    assert effect([0.0], [1.0], Bank([BankItem("c", [1], [2], False)])) == (None, 0)


def _tiny_model() -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=50, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)  # fmt: skip
    return Qwen2ForCausalLM(config).eval()


def test_bank_logprobs_match_one_unpadded_forward_per_item() -> None:
    model = _tiny_model()
    items = [
        BankItem("a", [3, 4, 5], [6, 7], True),
        BankItem("a", [3, 4], [9, 10, 11, 12], False),
        BankItem("b", [8], [1], True),
        BankItem("a", [3, 4, 5], [9, 2, 2, 6, 5], False),  # shares the first item's prompt
        BankItem("a", [3, 4, 5], [11], True),
    ]
    # padding, a prompt's samples split over two batches, a one-token completion
    got = bank_logprobs(model, items, pad_id=0, batch=2)
    for item, value in zip(items, got, strict=True):
        ids = torch.tensor([item.prompt_ids + item.completion_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0]
        total = 0.0
        for j, token in enumerate(item.completion_ids):
            pos = len(item.prompt_ids) - 1 + j  # the position that predicts this token
            total += torch.log_softmax(logits[pos].double(), -1)[token].item()
        assert value == pytest.approx(total / len(item.completion_ids), abs=1e-5)
