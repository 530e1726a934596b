"""The training effect to first order: which way one GRPO step on an arm's rewards moves the
bank (`training.effect`), for every arm from one pass over the samples.

The bank statistic is linear in the bank's log-probabilities: F(θ) = Σ_j c_j ℓ_j(θ), with
ℓ_j an item's length-normalised log-probability and c_j = +1/(n_pass · T) on a passing item
of a contrast task, −1/(n_fail · T) on a failing one (T contrast tasks; 0 elsewhere), so
that F(θ_s) − F(θ_0) is `training.effect.effect` (`bank_weights`; tested).

One GRPO step (`training.grpo`: ART's loss, each token weighing 1/its sequence's length, the
advantages rescaled by their mean |A·w|) has, at importance ratio 1 (the first step on the
policy's own samples), the gradient

    ∇L = − Σ_i A_i ∇ℓ_i / Σ_i |A_i|,

sums over the batch's samples, ℓ_i a sample's length-normalised log-probability at the
training temperature (the weights' normalisation cancels against the rescale). A step of
plain SGD at learning rate η therefore moves F by

    ΔF = η Σ_i A_i s_i / Σ_i |A_i|  +  O(η²),       s_i = ⟨∇ℓ_i, ∇F⟩,

before gradient clipping. s_i does not depend on the arm: one backward over the bank gives
∇F (`bank_gradient`), and s_i is the derivative of ℓ_i along ∇F, taken by central
differences, (ℓ_i(θ + h·u) − ℓ_i(θ − h·u)) / 2h · |∇F| with u = ∇F / |∇F|: two forwards
without gradient over every training sample (`directional_slopes`). Every arm's effect is
then arithmetic on its advantages (`group_terms`): per task N = Σ A_i s_i, D = Σ |A_i|, and
the effect of one step on a batch of all the tasks is η ΣN / ΣD, a ratio of per-task sums
(its CI: tasks resampled). Any number of arms, flip rates and placebo draws costs nothing
more.

What it is not: the effect of many steps, of Adam (whose first step is the sign of the
gradient, not the gradient), or of the clip; the step-based study (`training.study`,
`method: steps`) measures those, a few groups at a time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from judgelab.advantage import group_advantages, has_spread
from judgelab.training.effect import (
    Bank,
    BankItem,
    bank_logprobs,
    prompt_batches,
    shared_prompt_means,
)


def norm(tensors: Sequence[Any]) -> float:
    """The Euclidean norm of a vector held as several tensors (a model's parameters), in
    double precision."""
    return math.sqrt(sum(float((t.double() ** 2).sum()) for t in tensors))


def bank_weights(bank: Bank) -> list[float]:
    """Each bank item's coefficient c_j in F = Σ c_j ℓ_j (module docstring)."""
    tasks = bank.contrast_tasks
    counts: dict[tuple[str, bool], int] = {}
    for item in bank.items:
        counts[(item.task_id, item.passed)] = counts.get((item.task_id, item.passed), 0) + 1
    out = []
    for item in bank.items:
        if item.task_id not in tasks:
            out.append(0.0)
            continue
        sign = 1.0 if item.passed else -1.0
        out.append(sign / (counts[(item.task_id, item.passed)] * len(tasks)))
    return out


def bank_gradient(
    model: Any, bank: Bank, pad_id: int, params: Sequence[Any], batch: int = 8
) -> tuple[float, list[Any]]:
    """F at the model's parameters and ∇F with respect to `params` (the trainable ones), by
    one backward per prompt batch (F is linear in the items: the gradients add up). The
    model is put in eval mode (no dropout); `params`' .grad is cleared before and after."""
    import torch

    model.eval()
    weights = bank_weights(bank)
    for p in params:
        p.grad = None
    value = 0.0
    for rows in prompt_batches(bank.items, batch):
        c = torch.tensor([weights[r] for r in rows])
        if not bool(c.abs().sum() > 0):
            continue
        items = [bank.items[r] for r in rows]
        means = shared_prompt_means(
            model, items[0].prompt_ids, [i.completion_ids for i in items], pad_id
        )
        part = (c * means).sum()
        part.backward()
        value += float(part.detach())
    grads = [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone() for p in params]
    for p in params:
        p.grad = None
    return value, grads


def directional_slopes(
    model: Any,
    items: Sequence[BankItem],
    pad_id: int,
    params: Sequence[Any],
    direction: Sequence[Any],
    step: float,
    temperature: float = 1.0,
    batch: int = 8,
) -> list[float]:
    """⟨∇ℓ_i, direction⟩ for each item (ℓ_i its length-normalised log-probability at
    `temperature`), by central differences at distance `step` along the unit direction;
    `params` are restored exactly afterwards. A zero direction gives zeros."""
    import torch

    length = norm(direction)
    if length == 0.0:
        return [0.0] * len(items)
    saved = [p.detach().clone() for p in params]
    values: dict[int, list[float]] = {}
    try:
        for sign in (1, -1):
            with torch.no_grad():
                for p, p0, d in zip(params, saved, direction, strict=True):
                    p.copy_(p0 + (sign * step / length) * d.to(p.dtype))
            values[sign] = bank_logprobs(model, items, pad_id, batch, temperature)
    finally:
        with torch.no_grad():
            for p, p0 in zip(params, saved, strict=True):
                p.copy_(p0)
    return [(a - b) / (2 * step) * length for a, b in zip(values[1], values[-1], strict=True)]


def group_terms(slopes: Sequence[float], rewards: Sequence[float | None]) -> tuple[float, float]:
    """One group's (N, D) = (Σ A_i s_i, Σ |A_i|) under an arm's rewards (None: unscored,
    outside the group's statistics as in the GRPO batch); (0, 0) for a group without spread."""
    kept = [(s, r) for s, r in zip(slopes, rewards, strict=True) if r is not None]
    values = [r for _, r in kept]
    if not has_spread(values):
        return 0.0, 0.0
    adv = group_advantages(values)
    return (
        float(sum(a * s for a, (s, _) in zip(adv, kept, strict=True))),
        float(sum(abs(a) for a in adv)),
    )
