"""The training effect of a judge, measurable after a few CPU steps: which way GRPO moved the
policy on a fixed bank of held-out samples whose test verdicts are known.

The bank (`Bank`) is drawn once from the base policy: for each bank task (none of them
trained on), `m` samples at the training temperature, each with its test verdict. A policy's
score on a bank sample is its length-normalised log-probability, the mean over the
completion's tokens of log p(token | prefix) (the quantity GRPO's loss moves: each token of
a sequence weighs 1/its length there). The effect of training, from policy_0 to policy_s:

    effect = mean over bank tasks t with a passing and a failing sample of
             [ mean_{passing i in t} Δ_i  −  mean_{failing j in t} Δ_j ],
    Δ_i = log p_s(sample i) − log p_0(sample i)   (length-normalised).

Positive: training made the bank's passing code more likely relative to its failing code,
the direction the tests would push; 0: no preference (a judge without signal, or no
movement); negative: it pushed failing code up. Tasks whose samples all pass or all fail
carry no contrast and are left out (`n_tasks` counts those used). Each task weighs the same.

`bank_logprobs` runs the forward passes (torch, imported lazily); `task_effects` and
`effect` are the arithmetic, on numpy arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BankItem:
    """One held-out sample of the base policy: its prompt and completion token ids and
    whether its code passed the task's tests."""

    task_id: str
    prompt_ids: list[int]
    completion_ids: list[int]
    passed: bool


@dataclass(frozen=True)
class Bank:
    items: list[BankItem]

    @property
    def contrast_tasks(self) -> list[str]:
        """The tasks with a passing and a failing sample, in first-seen order."""
        seen: dict[str, set[bool]] = {}
        for item in self.items:
            seen.setdefault(item.task_id, set()).add(item.passed)
        return [t for t, kinds in seen.items() if len(kinds) == 2]

    def summary(self) -> dict[str, int]:
        return {
            "bank_samples": len(self.items),
            "bank_tasks": len({i.task_id for i in self.items}),
            "bank_contrast_tasks": len(self.contrast_tasks),
            "bank_passing": sum(i.passed for i in self.items),
        }


def task_effects(
    delta: Sequence[float], task_ids: Sequence[str], passed: Sequence[bool]
) -> dict[str, float]:
    """Per task with both kinds: mean Δ of its passing samples minus mean Δ of its failing."""
    d = np.asarray(delta, dtype=float)
    tasks = np.asarray(task_ids, dtype=object)
    ok = np.asarray(passed, dtype=bool)
    out: dict[str, float] = {}
    for t in dict.fromkeys(task_ids):
        here = tasks == t
        good, bad = d[here & ok], d[here & ~ok]
        if good.size and bad.size:
            out[str(t)] = float(good.mean() - bad.mean())
    return out


def effect(before: Sequence[float], after: Sequence[float], bank: Bank) -> tuple[float | None, int]:
    """The training effect (module docstring) from each bank item's length-normalised
    log-probability before and after training; and the number of tasks it averages (None
    when the bank has no task with both kinds)."""
    delta = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    per_task = task_effects(delta, [i.task_id for i in bank.items], [i.passed for i in bank.items])
    if not per_task:
        return None, 0
    return float(np.mean(list(per_task.values()))), len(per_task)


def bank_logprobs(
    model: Any, items: Sequence[BankItem], pad_id: int, batch: int = 8, temperature: float = 1.0
) -> list[float]:
    """Each item's mean log p(completion token | prefix) under `model` (a causal LM in
    whatever adapter state the caller set), at `temperature`. No gradient; the model is put
    in eval mode.

    Items with the same prompt (a bank task's samples) share one forward of the prompt: its
    KV cache is copied to up to `batch` right-padded completion rows, so a prompt of P tokens
    with m samples of C costs P + m·C positions, not m·(P + C); and the vocabulary is
    projected on completion positions only."""
    import torch

    model.eval()
    out = [0.0] * len(items)
    with torch.no_grad():
        for rows in prompt_batches(items, batch):
            means = shared_prompt_means(
                model, items[rows[0]].prompt_ids, [items[r].completion_ids for r in rows],
                pad_id, temperature,
            )  # fmt: skip
            for r, value in zip(rows, means.tolist(), strict=True):
                out[r] = float(value)
    return out


def prompt_batches(items: Sequence[BankItem], batch: int) -> list[list[int]]:
    """Item indices grouped by prompt, at most `batch` a group, in first-seen order."""
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for i, item in enumerate(items):
        if not item.completion_ids:
            raise ValueError(f"bank item of {item.task_id} has an empty completion")
        by_prompt.setdefault(tuple(item.prompt_ids), []).append(i)
    return [rows[s : s + batch] for rows in by_prompt.values() for s in range(0, len(rows), batch)]


def shared_prompt_means(
    model: Any,
    prompt: list[int],
    completions: list[list[int]],
    pad_id: int,
    temperature: float = 1.0,
) -> Any:
    """The mean completion log-probability of each of `completions` after one `prompt`, at
    `temperature`: a tensor of len(completions), differentiable where the caller's grad mode
    allows (`first_order` differentiates the bank's)."""
    import torch

    device = next(model.parameters()).device
    n, p = len(completions), len(prompt)
    head = model(input_ids=torch.tensor([prompt], device=device), use_cache=True, logits_to_keep=1)
    cache = head.past_key_values
    cache.reorder_cache(torch.zeros(n, dtype=torch.long, device=device))  # one copy per row
    width = max(len(c) for c in completions)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, p + width), dtype=torch.long)
    mask[:, :p] = 1
    for r, c in enumerate(completions):
        ids[r, : len(c)] = torch.tensor(c)
        mask[r, p : p + len(c)] = 1
    position = torch.arange(p, p + width).expand(n, -1)
    tail = model(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        position_ids=position.to(device),
        past_key_values=cache,
        logits_to_keep=torch.arange(0, width - 1, device=device),
    ).logits  # row r, column j predicts completion token j + 1
    first = head.logits[:, -1:].expand(n, -1, -1)  # the prompt's last position: token 0
    logits = torch.cat([first, tail], dim=1).float() / temperature  # [n, width, V]
    picked = logits.gather(-1, ids[:, :, None].to(device))[..., 0] - logits.logsumexp(-1)
    lengths = torch.tensor([len(c) for c in completions], device=device)
    valid = torch.arange(width, device=device)[None, :] < lengths[:, None]
    return (picked * valid).sum(1).cpu() / lengths.cpu()
