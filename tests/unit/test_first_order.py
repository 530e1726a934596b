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
    bank_task_gradients,
    bank_task_weights,
    bank_weights,
    directional_slopes,
    group_terms,
    sample_slopes,
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


def test_per_bank_task_slopes_add_up_to_the_whole_banks() -> None:
    """∇F_b per contrast bank task against autograd, their mean is ∇F, and each sample's
    s_ib by `sample_slopes` against autograd: Σ_b s_ib / T is today's s_i, the central
    difference's within its error (issue 63: the bank tasks become a resampled dimension)."""
    tiny = _Tiny()
    params = tiny.trainable()
    per = bank_task_weights(BANK)
    assert list(per) == ["a", "b"]  # "c" has no contrast
    for j, c in enumerate(bank_weights(BANK)):
        assert sum(w[j] for w in per.values()) / 2 == pytest.approx(c)
    values, grads = bank_task_gradients(tiny.model, BANK, tiny.pad_id, params, batch=2)
    value, whole = bank_gradient(tiny.model, BANK, tiny.pad_id, params)
    assert sum(values.values()) / 2 == pytest.approx(value, abs=1e-6)
    for b, weights in per.items():
        f_b = sum(
            w * _mean_logprob(tiny.model, i) for w, i in zip(weights, BANK.items, strict=True)
        )
        exact = torch.autograd.grad(f_b, params)
        for got, want in zip(grads[b], exact, strict=True):
            assert torch.allclose(got, want, atol=1e-6, rtol=1e-4)
    for g, (a, b) in zip(whole, zip(grads["a"], grads["b"], strict=True), strict=True):
        assert torch.allclose(g, (a + b) / 2, atol=1e-7, rtol=1e-5)
    assert all(p.grad is None for p in params)

    samples = [BankItem("t", [1, 2], [5, 6, 7], True), BankItem("t", [1, 2], [8], False),
               BankItem("u", [4], [9, 9, 3, 2], True)]  # fmt: skip
    slopes = sample_slopes(tiny.model, samples, tiny.pad_id, params, [grads["a"], grads["b"]],
                           0.7)  # fmt: skip
    fd = directional_slopes(tiny.model, samples, tiny.pad_id, params, whole, 1e-2, 0.7)
    for item, s, s_fd in zip(samples, slopes, fd, strict=True):
        g = torch.autograd.grad(_mean_logprob(tiny.model, item, 0.7), params)
        for s_b, b in zip(s, ("a", "b"), strict=True):
            want = float(sum((x * y).sum() for x, y in zip(g, grads[b], strict=True)))
            assert s_b == pytest.approx(want, rel=1e-5, abs=1e-9)
        assert sum(s) / 2 == pytest.approx(s_fd, rel=2e-2, abs=1e-6)
        assert abs(s[0] - s[1]) > 1e-4  # the bank tasks differ: per-bank slopes carry more
    assert sample_slopes(tiny.model, samples, tiny.pad_id, params, []) == [[], [], []]


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


def test_the_studys_terms_carry_each_bank_tasks_numerator() -> None:
    """`Study._first_order` on per-bank slopes: N per bank task by hand, N their mean, and
    the effect on each bank task alone (`bank_effects`) averaging to the arm's effect."""
    from types import SimpleNamespace

    from judgelab.config import TrainSettings
    from judgelab.training.study import BankSlopes, Study

    study = object.__new__(Study)
    study.train = TrainSettings(learning_rate=0.5)
    drawn = [SimpleNamespace(task=SimpleNamespace(task_id=t)) for t in ("t0", "t1")]
    rows = [[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]  # t1 has no spread: no step
    judged = [SimpleNamespace(rows=[{"score": r, "status": "scored"} for r in g]) for g in rows]
    values = [[[0.5, 1.5], [-1.0, 2.0], [2.0, 0.0], [1.5, 1.0]], [[1.0, 1.0]] * 4]
    row, terms = study._first_order(drawn, judged, BankSlopes(["x", "y"], values))
    # t0's advantages ±1 (std 0.5): N_x = 0.5 + 1 + 2 − 1.5 = 2, N_y = 1.5 − 2 + 0 − 1 = −1.5
    assert terms[0]["n_bank"] == pytest.approx({"x": 2.0, "y": -1.5}, abs=1e-4)
    assert terms[0]["n"] == pytest.approx(0.25, abs=1e-4) and terms[0]["d"] == pytest.approx(4)
    assert terms[1] == {"task_id": "t1", "n": 0.0, "d": 0.0, "n_bank": {"x": 0.0, "y": 0.0}}
    assert row["effect"] == pytest.approx(0.5 * 0.25 / 4, rel=1e-4)
    assert row["bank_effects"] == pytest.approx({"x": 0.25, "y": -0.1875}, rel=1e-4)
    assert sum(row["bank_effects"].values()) / 2 == pytest.approx(row["effect"])


def test_the_studys_slopes_are_per_bank_and_cached_under_their_own_key(tmp_path) -> None:
    """`Study._slopes` on the tiny model: one slope per (sample, contrast bank task), the
    product's `sample_slopes` along each ∇F_b; a second call reads the cache; and an entry of
    the old whole-bank kind (its key without `slopes`, with `fd_step`) is never read."""
    from types import SimpleNamespace

    from judgelab.cache import JsonCache
    from judgelab.config import TrainSettings
    from judgelab.config.training import StudySettings
    from judgelab.training.draws import drawn_digest
    from judgelab.training.study import Study, _bank_key

    tiny = _Tiny()
    policy = SimpleNamespace(zoo_name="tiny", dtype="float32", device="cpu", active="a",
                             model=tiny.model, pad_id=0, trainable=tiny.trainable,
                             init_adapter=lambda active, seed: None)  # fmt: skip
    study = object.__new__(Study)
    study.train, study.study = TrainSettings(), StudySettings()
    study.results = JsonCache(tmp_path, "study")
    drawn = [SimpleNamespace(task=SimpleNamespace(task_id=t), messages=[{"content": t}],
                             samples=[SimpleNamespace(token_ids=c) for c in comps])
             for t, comps in (("g0", [[4, 5], [9, 9, 2]]), ("g1", [[7], [3, 8, 1]]))]  # fmt: skip
    prompts = [[1, 2, 3], [6, 2]]
    old = study._key(policy, method="first-order", lora=study.train.lora.model_dump(mode="json"),
                     temperature=study.train.temperature, fd_step=study.study.fd_step, seed=0,
                     groups=drawn_digest(drawn), bank=_bank_key(BANK))  # fmt: skip
    study.results.put(old, {"slopes": [[1.0, 1.0], [1.0, 1.0]], "seconds": 0.0})
    slopes, _ = study._slopes(policy, 0, drawn, prompts, BANK)  # type: ignore[arg-type]
    assert slopes.banks == ["a", "b"] and study.results.misses == 1
    _, grads = bank_task_gradients(tiny.model, BANK, 0, tiny.trainable())
    items = [BankItem("g0", [1, 2, 3], [4, 5], True), BankItem("g1", [6, 2], [3, 8, 1], True)]
    want = sample_slopes(tiny.model, items, 0, tiny.trainable(), [grads["a"], grads["b"]])
    assert slopes.values[0][0] == pytest.approx(want[0], rel=1e-9)
    assert slopes.values[1][1] == pytest.approx(want[1], rel=1e-9)
    assert slopes.whole()[1][1] == pytest.approx(sum(want[1]) / 2, rel=1e-9)
    again, _ = study._slopes(policy, 0, drawn, prompts, BANK)  # type: ignore[arg-type]
    assert study.results.hits == 1 and again == slopes
