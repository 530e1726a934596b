"""One GRPO step, with ART's definitions.

Advantages are `judgelab.advantage`'s (ART's `std` convention: per group, reward minus the
group mean, divided by the population std; a flat group 0, never divided); each trajectory's
tokens weigh 1/its length, normalised to mean 1 over the batch's trained tokens; packed
advantages are rescaled by mean |advantage × weight| (`art.preprocessing.pack`). The loss is
ART's own `art.loss.loss_fn`,
called unchanged on CPU: by default the clipped importance-weight policy gradient (ε=1,
ε_high=4), or PPO's clipped surrogate with `train.loss.ppo`. Aggregation: each token's term
weighs 1/(its sequence's length), so every sequence counts once whatever its length (TRL's
length-biased `"grpo"` aggregation, not DAPO's token-level mean), and the batch-wide
mean-|A·w| rescale makes the step size independent of the advantages' overall scale. A group
whose rewards have no spread carries no signal and is skipped (counted); a candidate with no
reward (unscored) leaves its group's statistics and the batch.

Simplifications, stated: one optimiser step per batch of sampled groups, on-policy: the
importance ratio differs from 1 only through numerical differences between the sampling and
the training forwards (`ratio_mean`, `clip_fraction` in the history show it), so the clip never
binds and `train.loss.ppo` / `epsilon` change nothing in practice; no KL penalty, no entropy
term.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judgelab.config import LossSettings


@dataclass(frozen=True)
class Trajectory:
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]  # sampling-time log-probabilities of completion_ids
    advantage: float
    group: int


def art_config(loss: LossSettings) -> dict[str, Any]:
    config: dict[str, Any] = {"ppo": loss.ppo}
    if loss.epsilon is not None:
        config["epsilon"] = loss.epsilon
    if loss.epsilon_high is not None:
        config["epsilon_high"] = loss.epsilon_high
    return config


def clip_bounds(loss: LossSettings) -> tuple[float, float]:
    """The ratio interval ART clips to, with ART's defaults."""
    eps = loss.epsilon if loss.epsilon is not None else (0.2 if loss.ppo else 1.0)
    default_high = eps if loss.ppo else 4.0
    high = loss.epsilon_high if loss.epsilon_high is not None else default_high
    return 1 - eps, 1 + high


def pack(trajectories: Sequence[Trajectory], pad_id: int) -> dict[str, Any]:
    """ART's packed inputs, one row per trajectory: tokens, masks, old logprobs, advantages."""
    import torch

    width = max(len(t.prompt_ids) + len(t.completion_ids) for t in trajectories)
    n = len(trajectories)
    tokens = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    assistant = torch.zeros((n, width), dtype=torch.bool)
    logprobs = torch.full((n, width), float("nan"))
    advantages = torch.zeros((n, width))
    weights = torch.zeros((n, width))
    group_ids = torch.full((n, width), -1, dtype=torch.long)
    for i, t in enumerate(trajectories):
        p, c = len(t.prompt_ids), len(t.completion_ids)
        tokens[i, : p + c] = torch.tensor(t.prompt_ids + t.completion_ids)
        attention[i, : p + c] = 1
        assistant[i, p : p + c] = True
        logprobs[i, p : p + c] = torch.tensor(t.logprobs)
        advantages[i, p : p + c] = t.advantage
        weights[i, p : p + c] = 1.0 / (c + 1e-6)
        group_ids[i, : p + c] = t.group
    # ART's packer normalises the weights to mean 1 over trained tokens first. With the
    # advantage rescale below the policy loss does not change (a factor c on the weights
    # comes back as 1/c on the advantages), but a term weighed by `weights` alone (ART's
    # entropy or KL terms) would: kept so that `inputs` are ART's own.
    if assistant.any():
        weights[assistant] /= weights[assistant].mean()
    scale = (advantages[assistant].abs() * weights[assistant]).mean()
    if scale > 0:
        advantages[assistant] /= scale
    return {
        "tokens": tokens,
        "attention_mask": attention,
        "assistant_mask": assistant,
        "logprobs": logprobs,
        "advantages": advantages,
        "weights": weights,
        "group_ids": group_ids,
    }


@dataclass(frozen=True)
class StepStats:
    loss: float
    grad_norm: float
    clip_fraction: float
    ratio_mean: float
    tokens: int


def policy_loss(
    inputs: dict[str, Any], new_logprobs: Any, loss: LossSettings
) -> tuple[Any, float, float]:
    """ART's loss on packed inputs, plus the clip fraction and mean ratio over trained tokens.

    `new_logprobs[:, t]` is log p(tokens[t+1] | tokens[..t]), as ART's trainers compute it.
    """
    import torch
    from art.loss import loss_fn, shift_tensor

    result = loss_fn(inputs, new_logprobs, None, None, art_config(loss))  # type: ignore[arg-type]
    mask = shift_tensor(inputs["assistant_mask"], False)
    old = shift_tensor(inputs["logprobs"], float("nan"))[mask]
    ratio = torch.exp(new_logprobs.detach()[mask] - old)
    low, high = clip_bounds(loss)
    clipped = ((ratio < low) | (ratio > high)).float().mean().item() if ratio.numel() else 0.0
    ratio_mean = ratio.mean().item() if ratio.numel() else 1.0
    return result.policy_loss, clipped, ratio_mean


def row_chunks(trajectories: Sequence[Trajectory], rows: int | None) -> list[list[int]]:
    """Consecutive row indices in chunks of at most `rows` (None: one chunk), never splitting
    a group's rows where the group fits (a group larger than `rows` is one chunk)."""
    if rows is None or len(trajectories) <= rows:
        return [list(range(len(trajectories)))]
    groups: list[list[int]] = []
    for i, t in enumerate(trajectories):
        if groups and trajectories[groups[-1][0]].group == t.group:
            groups[-1].append(i)
        else:
            groups.append([i])
    chunks: list[list[int]] = []
    for g in groups:
        if chunks and len(chunks[-1]) + len(g) <= rows:
            chunks[-1].extend(g)
        else:
            chunks.append(list(g))
    return chunks


def grpo_step(
    policy: Any,
    optimizer: Any,
    trajectories: Sequence[Trajectory],
    loss: LossSettings,
    max_grad_norm: float,
    temperature: float = 1.0,
    rows_per_forward: int | None = None,
) -> StepStats:
    """Forward, ART loss, backward, clip, one optimiser step on the LoRA parameters. The new
    log-probabilities are taken at the sampling `temperature`, as the trajectories' are.

    `rows_per_forward` bounds the rows of one forward (whole groups, `row_chunks`): the batch
    is packed once (its weights and advantages normalised over all of it), each chunk's loss
    is ART's token mean over the chunk, scaled by the chunk's share of the batch's trained
    tokens, and the gradients accumulate, so the step is the one-forward step up to float
    rounding (tested) while memory holds one chunk's [rows, tokens, vocabulary] logits, not
    the batch's."""
    import torch

    inputs = pack(trajectories, policy.pad_id)
    inputs = {k: v.to(policy.device) for k, v in inputs.items()}
    policy.model.train()
    optimizer.zero_grad(set_to_none=True)
    trained = int(inputs["assistant_mask"].sum().item())
    total = trained + 1e-6  # ART's denominator
    value = clipped = ratio_mean = 0.0
    for rows in row_chunks(trajectories, rows_per_forward):
        width = max(len(trajectories[i].prompt_ids) + len(trajectories[i].completion_ids)
                    for i in rows)  # fmt: skip
        index = torch.tensor(rows, device=policy.device)
        part = {k: v.index_select(0, index)[:, :width] for k, v in inputs.items()}
        first = min(len(trajectories[i].prompt_ids) for i in rows) - 1  # first completion
        new_logprobs = policy.sequence_logprobs(
            part["tokens"], part["attention_mask"], start=first, temperature=temperature
        )
        chunk_loss, chunk_clipped, chunk_ratio = policy_loss(part, new_logprobs, loss)
        tokens = float(part["assistant_mask"].sum().item())
        share = (tokens + 1e-6) / total  # of ART's token mean
        (chunk_loss * share).backward()
        value += float(chunk_loss.item()) * share
        weight = tokens / trained if trained else 1.0  # of the token averages
        clipped += chunk_clipped * weight
        ratio_mean += chunk_ratio * weight
    grad_norm = torch.nn.utils.clip_grad_norm_(policy.trainable(), max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return StepStats(
        loss=value,
        grad_norm=float(grad_norm),
        clip_fraction=clipped,
        ratio_mean=ratio_mean,
        tokens=trained,
    )
