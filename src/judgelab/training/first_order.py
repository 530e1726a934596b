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

before gradient clipping. s_i does not depend on the arm. The bank's tasks are a sample
too, so the study keeps s_i per contrast bank task b: F = Σ_b F_b / T with F_b = Σ_j c_bj ℓ_j
(`bank_task_weights`: c_bj = T·c_j on b's items), s_ib = ⟨∇ℓ_i, ∇F_b⟩ and s_i = Σ_b s_ib / T.
One backward over the bank split by task gives every ∇F_b (`bank_task_gradients`, the cost
of ∇F alone), and one forward and backward per training sample gives ∇ℓ_i, dotted with every
∇F_b at once (`sample_slopes`: exact). The alternative, the derivative of ℓ_i along one
direction by central differences, (ℓ_i(θ + h·u) − ℓ_i(θ − h·u)) / 2h · |d| with u = d / |d|
(`directional_slopes`: two forwards without gradient over every sample, what the study took
along ∇F until 2026-11-28), costs T such passes for the T bank tasks. Every arm's effect is
then arithmetic on its advantages (`group_terms`): per task N_b = Σ A_i s_ib, N = Σ_b N_b / T,
D = Σ |A_i|, and the effect of one step on a batch of all the tasks is η ΣN / ΣD, a ratio of
per-task sums (its CI: training tasks and bank tasks resampled, `analysis.crossed`). Any
number of arms, flip rates and placebo draws costs nothing more.

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
    model.eval()
    return _weighted_gradient(model, bank, bank_weights(bank), pad_id, params, batch)


def bank_task_weights(bank: Bank) -> dict[str, list[float]]:
    """Per contrast bank task b, each bank item's coefficient in F_b = Σ_j c_bj ℓ_j:
    ±1/(its task's passing or failing count) on b's items, 0 elsewhere; F = Σ_b F_b / T,
    so that c_j = Σ_b c_bj / T is `bank_weights`' (module docstring)."""
    tasks = bank.contrast_tasks
    whole = bank_weights(bank)
    return {
        b: [w * len(tasks) if item.task_id == b else 0.0
            for w, item in zip(whole, bank.items, strict=True)]
        for b in tasks
    }  # fmt: skip


def bank_task_gradients(
    model: Any, bank: Bank, pad_id: int, params: Sequence[Any], batch: int = 8
) -> tuple[dict[str, float], dict[str, list[Any]]]:
    """Per contrast bank task b (in the bank's order), F_b and ∇F_b with respect to `params`
    (`bank_task_weights`): one backward per prompt batch of b's items, as `bank_gradient`
    takes ∇F, so the T gradients together cost what ∇F costs. The model is put in eval
    mode; `params`' .grad is cleared before and after."""
    model.eval()
    values: dict[str, float] = {}
    grads: dict[str, list[Any]] = {}
    for b, weights in bank_task_weights(bank).items():
        own = Bank([i for i, w in zip(bank.items, weights, strict=True) if w != 0.0])
        own_weights = [w for w in weights if w != 0.0]
        values[b], grads[b] = _weighted_gradient(model, own, own_weights, pad_id, params, batch)
    return values, grads


def _weighted_gradient(
    model: Any,
    bank: Bank,
    weights: Sequence[float],
    pad_id: int,
    params: Sequence[Any],
    batch: int,
) -> tuple[float, list[Any]]:
    """Σ_j weights_j ℓ_j over `bank`'s items and its gradient in `params` (.grad cleared
    before and after)."""
    import torch

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


def sample_slopes(
    model: Any,
    items: Sequence[BankItem],
    pad_id: int,
    params: Sequence[Any],
    directions: Sequence[Sequence[Any]],
    temperature: float = 1.0,
) -> list[list[float]]:
    """⟨∇ℓ_i, d⟩ for each item i and each direction d of `directions` (each a vector held
    as tensors shaped like `params`), exact: per item one forward and one backward of its ℓ_i
    (its length-normalised log-probability at `temperature`) in `params` only, then one
    product with every direction at once, in double precision. Costs one forward and
    backward per item whatever the number of directions (`directional_slopes` costs two
    forwards per item and direction). The model is put in eval mode; .grad is untouched."""
    import torch

    model.eval()
    if not directions:
        return [[] for _ in items]
    matrix = torch.stack(
        [torch.cat([t.detach().double().reshape(-1) for t in d]) for d in directions]
    )  # [directions, parameters]
    out = []
    for item in items:
        mean = shared_prompt_means(model, item.prompt_ids, [item.completion_ids], pad_id,
                                   temperature)[0]  # fmt: skip
        grads = torch.autograd.grad(mean, list(params), allow_unused=True)
        flat = torch.cat([
            (torch.zeros_like(p) if g is None else g).detach().double().reshape(-1)
            for p, g in zip(params, grads, strict=True)
        ])  # fmt: skip
        out.append((matrix @ flat).tolist())
    return out


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
