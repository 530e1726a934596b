"""The pooled ROC-AUC of every bootstrap resample, in time linear in the candidates.

A resample reweights tasks (`w`: resamples x tasks, counts). The pooled AUC's numerator is
the sum over (passing p, failing f) pairs of any tasks of w[task p] w[task f] (1 if f scores
below p, 1/2 on a tie): a quadratic form over tasks, which a task x task matrix computes in
O(resamples x tasks^2). With the scores sorted once into levels it is, per resample,
sum over levels of P_l (F_below_l + F_l / 2), where P_l and F_l are the resample's passing and
failing weight at level l: O(resamples x candidates). Every term is a half-integer, so the
sums are exact in any order and both ways give the same bits.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

CHUNK = 128  # resamples at a time: bounds the (resamples x levels) arrays' memory


@dataclass(frozen=True)
class PooledPairs:
    pass_at: sparse.csr_matrix  # (tasks, levels): passing candidates of task t at level l
    fail_at: sparse.csr_matrix

    @classmethod
    def of(
        cls, task_idx: np.ndarray, score: np.ndarray, passed: np.ndarray, n_tasks: int
    ) -> PooledPairs:
        levels, level = np.unique(score, return_inverse=True)
        shape = (n_tasks, max(len(levels), 1))

        def counts(rows: np.ndarray) -> sparse.csr_matrix:
            ones = np.ones(int(rows.sum()))
            return sparse.csr_matrix((ones, (task_idx[rows], level[rows])), shape=shape)

        return cls(counts(passed), counts(~passed))

    def numerator(self, w: np.ndarray) -> np.ndarray:
        """Per resample (row of `w`), the weighted count of (passing, failing) pairs the
        passing candidate wins, a tie counting 1/2."""
        out = np.zeros(w.shape[0])
        for start in range(0, w.shape[0], CHUNK):
            wt = w[start : start + CHUNK].T
            p = np.asarray(self.pass_at.T @ wt).T  # (chunk, levels)
            f = np.asarray(self.fail_at.T @ wt).T
            below = np.cumsum(f, axis=1) - f
            out[start : start + CHUNK] = (p * (below + 0.5 * f)).sum(axis=1)
        return out
