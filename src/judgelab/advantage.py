"""GRPO's group-relative advantage: the one definition training, the analysis and the guard use.

A group is the candidates a policy sampled for one prompt, each with a reward. Its advantages
are each reward minus the group's mean, then, by the `Convention`:

- `std` (default; ART's `art.preprocessing.tokenize`, TRL's `scale_rewards="group"`): divided
  by the group's standard deviation;
- `centred` (Dr. GRPO, RLOO-like; TRL's `scale_rewards="none"` / `False`): not divided, so a
  group scored [0.50, 0.50, 0.50, 0.51] pushes 50 times less than one scored [0, 1, 0, 1];
- `batch` (TRL's `scale_rewards="batch"`): divided by one standard deviation of every reward
  in the batch (only the batch form knows the batch).

The flat-group rule, one for every convention: a group whose rewards have no spread (max − min
≤ `FLAT`; one reward, or rounding noise between equal scores) has advantage exactly 0 for every
candidate. No division by a standard deviation near 0 happens, so no epsilon is added to it
(ART adds 1e-6, TRL 1e-4: both give 0 on an exactly flat group and differ from these values by
a relative 1e-6 or 1e-4 elsewhere). GRPO skips such groups (`has_spread`).

The standard deviation is the population one (ddof = 0, ART's) unless `ddof = 1` is asked
for (TRL's `torch.std`). Under `std` the two differ by the factor sqrt((k − 1) / k) for a
group of k, the same for every group of one size: ART's packer rescales advantages by their
mean |A·w| over the batch, and the analysis's figures are ratios of advantage products, so the
choice moves neither. tests/unit/test_advantage.py re-derives TRL's formula and checks it.

Pure numpy; imports nothing of judgelab, so every floor may use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np

Convention = Literal["std", "centred", "batch"]
CONVENTIONS: tuple[str, ...] = get_args(Convention)
FLAT = 1e-9  # a group whose rewards span no more than this is flat: advantage 0


def has_spread(rewards: Sequence[float] | np.ndarray) -> bool:
    """Whether GRPO steps on the group: at least two rewards, not all alike (`FLAT`)."""
    r = np.asarray(rewards, dtype=float)
    return r.size >= 2 and float(r.max() - r.min()) > FLAT


def _check(convention: str, ddof: int) -> None:
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown advantage convention {convention!r}; valid: {CONVENTIONS}")
    if ddof not in (0, 1):
        raise ValueError(f"ddof must be 0 (population std, ART) or 1 (sample std, TRL): {ddof}")


def grouped_advantages(
    rewards: np.ndarray,
    groups: np.ndarray,
    convention: Convention = "std",
    ddof: int = 0,
    eps: float = 0.0,
) -> np.ndarray:
    """Advantages of rewards in groups of any sizes: `groups` gives each reward's group (an
    integer label). Under `batch` the batch is every reward given. A group of one is flat.
    `eps` is added to a non-flat group's std under `std`, only to reproduce a trainer's own
    arithmetic exactly (TRL's 1e-4: `guard.trl.combine`); the flat rule holds whatever it is."""
    _check(convention, ddof)
    r = np.asarray(rewards, dtype=float)
    _, g = np.unique(np.asarray(groups), return_inverse=True)
    g = g.reshape(-1)
    if r.size == 0:
        return r.copy()
    n = np.bincount(g).astype(float)
    mean = np.bincount(g, weights=r) / n
    centred = r - mean[g]
    lo = np.full(n.size, np.inf)
    hi = np.full(n.size, -np.inf)
    np.minimum.at(lo, g, r)
    np.maximum.at(hi, g, r)
    flat = (hi - lo <= FLAT)[g]
    if convention == "centred":
        out = centred
    elif convention == "std":
        var = np.bincount(g, weights=centred**2) / np.maximum(n - ddof, 1.0)
        out = centred / np.where(flat, 1.0, np.sqrt(var[g]) + eps)
    else:  # batch: every reward's spread, one scale for all groups
        std = float(np.std(r, ddof=ddof)) if r.size > ddof else 0.0
        out = centred / std if std > 0 else np.zeros_like(r)
    return np.where(flat, 0.0, out)


def batch_advantages(
    rewards: np.ndarray, convention: Convention = "std", ddof: int = 0
) -> np.ndarray:
    """Advantages of many groups of one size at once: rewards [..., k], a group per row."""
    r = np.asarray(rewards, dtype=float)
    if r.ndim == 0:
        raise ValueError("batch_advantages needs rewards of shape [..., k]")
    k = r.shape[-1]
    labels = np.repeat(np.arange(r.size // k if k else 0), k)
    return grouped_advantages(r.reshape(-1), labels, convention, ddof).reshape(r.shape)


def group_advantages(
    rewards: Sequence[float] | np.ndarray, convention: Convention = "std", ddof: int = 0
) -> list[float]:
    """One group's advantages. `batch` needs the batch: use `batch_advantages`."""
    if convention == "batch":
        raise ValueError("the 'batch' convention scales by the batch: use batch_advantages")
    r = np.asarray(rewards, dtype=float).reshape(-1)
    return grouped_advantages(r, np.zeros(r.size, int), convention, ddof).tolist()
