"""The pooled ROC-AUC's resampled numerator (analysis.pooled_auc) against the pair-by-pair
definition, ties and more resamples than one chunk included."""

from __future__ import annotations

import numpy as np

from judgelab.analysis.pooled_auc import CHUNK, PooledPairs


def test_numerator_is_the_weighted_pair_count_exactly() -> None:
    rng = np.random.default_rng(3)
    n_tasks, n = 7, 40
    task = rng.integers(0, n_tasks, n)
    score = rng.integers(0, 5, n) / 4  # few levels: many ties, within and across tasks
    passed = rng.random(n) < 0.4
    w = rng.integers(0, 3, (CHUNK + 5, n_tasks)).astype(float)
    expected = np.zeros(w.shape[0])
    for p in np.flatnonzero(passed):
        for f in np.flatnonzero(~passed):
            credit = 1.0 if score[f] < score[p] else 0.5 if score[f] == score[p] else 0.0
            expected += w[:, task[p]] * w[:, task[f]] * credit
    got = PooledPairs.of(task, score, passed, n_tasks).numerator(w)
    assert np.array_equal(got, expected)  # half-integers: exact, whatever the order


def test_no_failing_or_no_passing_candidate_gives_zero() -> None:
    task = np.array([0, 0, 1])
    pairs = PooledPairs.of(task, np.array([0.1, 0.5, 0.9]), np.ones(3, bool), 2)
    assert pairs.numerator(np.ones((3, 2))).tolist() == [0.0, 0.0, 0.0]
