"""ART's loss on packed inputs, and the reward-hacking alarm, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from judgelab.config import LossSettings
from judgelab.training.grpo import (
    Trajectory,
    clip_bounds,
    pack,
    policy_loss,
)
from judgelab.training.history import reward_pass_divergence
from judgelab.training.plan import select_heldout
from judgelab.training.tally import reward_stats


def _fixture() -> tuple[dict, torch.Tensor]:
    """Two trajectories of one group: prompt [5, 6], completions of 2 and 1 tokens."""
    trajs = [
        Trajectory([5, 6], [7, 8], logprobs=[-1.0, -2.0], advantage=1.0, group=0),
        Trajectory([5, 6], [9], logprobs=[-0.5], advantage=-1.0, group=0),
    ]
    inputs = pack(trajs, pad_id=0)
    # new_logprobs[:, t] = log p(token t+1 | ..t): the completion tokens sit at t = 1, 2 (row 0)
    # and t = 1 (row 1).
    new = torch.zeros(2, 4)
    new[0, 1], new[0, 2] = -0.9, -2.2
    new[1, 1] = -0.4
    return inputs, new


def test_pack_layout() -> None:
    inputs, _ = _fixture()
    assert inputs["tokens"].tolist() == [[5, 6, 7, 8], [5, 6, 9, 0]]
    assert inputs["assistant_mask"].tolist() == [
        [False, False, True, True],
        [False, False, True, False],
    ]
    # ART's pack: weights 1/length (.5, .5, 1) normalised to mean 1 over trained tokens
    # (x 3/2), then advantages rescaled by mean |adv * weight|: (.75 + .75 + 1.5) / 3 = 1.
    assert inputs["weights"][0, 2].item() == pytest.approx(0.75, rel=1e-5)
    assert inputs["weights"][1, 2].item() == pytest.approx(1.5, rel=1e-5)
    assert inputs["weights"][inputs["assistant_mask"]].mean().item() == pytest.approx(1.0)
    assert inputs["advantages"][0, 2].item() == pytest.approx(1.0, rel=1e-5)
    assert inputs["advantages"][1, 2].item() == pytest.approx(-1.0, rel=1e-5)


def _hand_loss(ppo: bool) -> float:
    # (old, new, advantage, weight) per trained token, advantages after pack's rescale.
    tokens = [(-1.0, -0.9, 1.0, 0.75), (-2.0, -2.2, 1.0, 0.75), (-0.5, -0.4, -1.0, 1.5)]
    total = 0.0
    for old, new, adv, w in tokens:
        ratio = math.exp(new - old)
        if ppo:  # PPO clipped surrogate, epsilon 0.2
            term = -min(ratio * adv, min(max(ratio, 0.8), 1.2) * adv)
        else:  # ART's default: clip(ratio, 0, 5) (detached) * advantage * new logprob
            term = -(min(max(ratio, 0.0), 5.0) * adv * new)
        total += term * w
    return total / (3 + 1e-6)  # reduction "mean": over trained tokens


@pytest.mark.parametrize("ppo", [False, True])
def test_loss_equals_hand_computed_reference(ppo: bool) -> None:
    inputs, new = _fixture()
    settings = LossSettings(ppo=ppo)
    value, clipped, ratio_mean = policy_loss(inputs, new, settings)
    assert value.item() == pytest.approx(_hand_loss(ppo), rel=1e-5)
    ratios = [math.exp(0.1), math.exp(-0.2), math.exp(0.1)]
    assert ratio_mean == pytest.approx(sum(ratios) / 3, rel=1e-5)
    low, high = clip_bounds(settings)
    assert clipped == pytest.approx(sum(not (low <= r <= high) for r in ratios) / 3)


def test_clip_fraction_counts_tokens_outside_the_ppo_interval() -> None:
    inputs, new = _fixture()
    new[0, 1] = -1.0 + math.log(1.5)  # ratio 1.5: outside [0.8, 1.2]
    _, clipped, _ = policy_loss(inputs, new, LossSettings(ppo=True))
    assert clipped == pytest.approx(1 / 3)
    assert clip_bounds(LossSettings(ppo=True)) == pytest.approx((0.8, 1.2))
    assert clip_bounds(LossSettings()) == pytest.approx((0.0, 5.0))


def test_loss_gradient_pushes_up_positive_advantage_tokens() -> None:
    inputs, new = _fixture()
    new.requires_grad_(True)
    value, _, _ = policy_loss(inputs, new, LossSettings())
    value.backward()
    assert new.grad[0, 1] < 0  # minimising the loss raises this token's logprob
    assert new.grad[1, 1] > 0  # and lowers the negative-advantage one


def test_reward_stats_match_numpy() -> None:
    r = [0.1, 0.4, 0.4, 0.9, 1.0]
    s = reward_stats(r)
    assert s["reward_mean"] == pytest.approx(np.mean(r))
    assert s["reward_median"] == pytest.approx(np.median(r))
    assert s["reward_std"] == pytest.approx(np.std(r, ddof=1))  # the report's sample std
    assert reward_stats([0.5])["reward_std"] is None  # undefined for one reward, not 0
    q75, q25 = np.percentile(r, [75, 25])
    assert s["reward_iqr"] == pytest.approx(q75 - q25)
    assert reward_stats([])["reward_mean"] is None


def test_divergence_rule_compares_reward_with_the_same_samples_pass_rate() -> None:
    """The old adjacent-epoch rule, now descriptive (`reward_pass_divergence`). Hand-computed
    cases, margin 0.1: reward up and the same samples' pass rate down, each by at least the
    margin; held-out is not what it compares."""
    r = lambda e, reward, passed, held=0.5: {  # noqa: E731
        "epoch": e,
        "reward_mean": reward,
        "train_pass_rate": passed,
        "heldout_pass_rate": held,
    }
    rows = [
        r(0, 0.50, 0.50),
        r(1, 0.70, 0.25),  # +0.20 / -0.25: hacking
        r(2, 0.70 + 1e-9, 0.00),  # pass rate fell, reward moved by 1e-9 only: noise
        r(3, 0.95, 0.00),  # reward up, pass rate flat: not this alarm
        r(4, 0.99, 0.00, held=0.0),  # held-out fell, reward +0.04 < margin
        r(5, 1.00, None),  # no tested sample: nothing to compare
        r(6, 0.50, 0.50),
        r(7, 0.65, 0.45),  # pass rate fell 0.05 < margin
    ]
    assert reward_pass_divergence(rows, 0.1) == [False, True] + [False] * 6
    assert reward_pass_divergence(rows, 0.3) == [False] * 8  # 0.20 is below a 0.3 margin
    # an execution judge's reward is the pass rate itself: the alarm can never fire
    same = [r(e, p, p) for e, p in enumerate([0.2, 0.9, 0.1, 0.8, 0.0])]
    assert not any(reward_pass_divergence(same, 0.01))


def test_heldout_rule_prefers_mixed_tasks_in_order_then_closest_to_half() -> None:
    order = ["H/2", "H/3", "H/4", "H/5", "H/6"]
    rates = {"H/2": 1.0, "H/3": 0.5, "H/4": 0.0, "H/5": 0.25, "H/6": 0.75}
    assert select_heldout(rates, order, 2) == (["H/3", "H/5"], [])
    assert select_heldout(rates, order, 3) == (["H/3", "H/5", "H/6"], [])
    # too few mixed tasks: filled with the closest to 0.5, earlier first on ties
    ceiling = {"H/2": 1.0, "H/3": 0.5, "H/4": 0.0, "H/5": 1.0, "H/6": 0.0}
    assert select_heldout(ceiling, order, 2) == (["H/2", "H/3"], ["H/2"])


class _TinyPolicy:
    """Test-only: a tiny randomly initialised Qwen2 with Policy's forward (`sequence_logprobs`)
    and every parameter trainable; grpo_step's contract is about our own arithmetic."""

    def __init__(self, seed: int) -> None:
        from transformers import Qwen2Config, Qwen2ForCausalLM

        torch.manual_seed(seed)
        config = Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32,
                             num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                             max_position_embeddings=64)  # fmt: skip
        self.model, self.pad_id, self.device = Qwen2ForCausalLM(config), 0, "cpu"

    def trainable(self) -> list[torch.nn.Parameter]:
        return list(self.model.parameters())

    def sequence_logprobs(self, *args: object, **kwargs: object) -> torch.Tensor:
        from judgelab.training.policy import Policy

        return Policy.sequence_logprobs(self, *args, **kwargs)  # type: ignore[arg-type]


def _whole_projection(policy: _TinyPolicy, tokens: torch.Tensor, mask: torch.Tensor,
                      start: int, temperature: float) -> torch.Tensor:
    """Independent: every position's logits at once, log-softmax, the next token's entry."""
    logits = policy.model(input_ids=tokens, attention_mask=mask).logits[:, start:-1]
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    picked = logp.gather(-1, tokens[:, start + 1 :, None])[..., 0]
    return torch.nn.functional.pad(picked, (start, 1), value=0.0)


def test_chunked_logprobs_are_the_one_projection_values_and_gradients() -> None:
    """`sequence_logprobs` projecting `chunk` positions at a time (checkpointed) gives the
    whole projection's log-probabilities and the same gradient, at any chunk size, with a
    temperature and a start inside the sequence; so does gradient checkpointing of the
    layers."""
    from judgelab.training.policy import Policy

    tokens = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 8, 9], [3, 2, 9, 9, 1, 5, 0, 0, 0]])
    mask = (torch.arange(9) < torch.tensor([[9], [6]])).long()
    results = []
    for chunk, recompute in ((None, False), (1, False), (2, False), (5, False), (64, False),
                             (None, True), (3, True)):  # fmt: skip
        policy = _TinyPolicy(0)
        if recompute:  # train.gradient_checkpointing: the layers recomputed in the backward
            policy.model.gradient_checkpointing_enable({"use_reentrant": False})
            policy.model.train()
        logp = (
            _whole_projection(policy, tokens, mask, 2, 0.7) if chunk is None
            else Policy.sequence_logprobs(policy, tokens, mask, 2, 0.7, chunk)  # type: ignore[arg-type]
        )  # fmt: skip
        (logp * mask).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in policy.trainable()])
        results.append((logp.detach(), grads))
    assert results[0][0][:, :2].abs().sum() == 0 and results[0][0][:, 2:-1].abs().sum() > 0
    for logp, grads in results[1:]:
        assert torch.allclose(logp, results[0][0], atol=1e-6)
        assert torch.allclose(grads, results[0][1], atol=1e-6, rtol=1e-5)


def test_a_step_in_chunks_of_whole_groups_is_the_one_forward_step() -> None:
    """rows_per_forward: the same gradient (plain SGD, so the update is the gradient itself,
    scale included), the same loss, clip fraction and ratio, chunks never splitting a group."""
    from judgelab.training.grpo import grpo_step, row_chunks

    trajs = [
        Trajectory([1, 2, 3], [4, 5], [-1.0, -2.0], 1.0, 0),
        Trajectory([1, 2, 3], [6, 7, 8, 9], [-1.5, -0.5, -2.5, -1.0], -1.0, 0),
        Trajectory([3, 2], [7], [-0.7], 0.5, 1),
        Trajectory([3, 2], [5, 5, 6], [-2.0, -1.0, -0.2], -0.5, 1),
        Trajectory([4, 4, 4, 4], [9, 9], [-3.0, -0.1], 2.0, 2),
    ]
    assert row_chunks(trajs, 2) == [[0, 1], [2, 3], [4]]
    assert row_chunks(trajs, 3) == [[0, 1], [2, 3, 4]] and row_chunks(trajs, None) == [
        [0, 1, 2, 3, 4]]  # fmt: skip
    assert row_chunks(trajs[:2], 1) == [[0, 1]]  # a group is never split
    steps, params = [], []
    for rows in (None, 2, 3):
        policy = _TinyPolicy(0)
        opt = torch.optim.SGD(policy.trainable(), lr=1.0)
        steps.append(grpo_step(policy, opt, trajs, LossSettings(ppo=True), 1e9,
                               rows_per_forward=rows))  # fmt: skip
        params.append(torch.cat([p.detach().flatten() for p in policy.trainable()]))
    start = torch.cat([p.detach().flatten() for p in _TinyPolicy(0).trainable()])
    assert not torch.allclose(params[0], start)
    for chunked, step in zip(params[1:], steps[1:], strict=True):
        assert torch.allclose(chunked, params[0], atol=1e-6, rtol=1e-5)
        assert step.loss == pytest.approx(steps[0].loss, abs=1e-6)
        assert step.clip_fraction == pytest.approx(steps[0].clip_fraction, abs=1e-9)
        assert step.ratio_mean == pytest.approx(steps[0].ratio_mean, rel=1e-6)
        assert step.tokens == steps[0].tokens
