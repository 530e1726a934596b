"""The primary, signal fidelity, and the rates beside it (analysis/fidelity.py, docs/METRICS.md):
checked against a plain re-implementation written from the definition, and on judges whose
value is known by construction (the tests themselves, an inverted copy, a flat judge, a judge
that scores nothing, a blind judge that ties often)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from judgelab.analysis.fidelity import SIGNAL, truth_metrics
from judgelab.analysis.stats import CI_LEVEL, CIRule, resample_weights
from judgelab.analysis.truth import Truth

RULE = CIRule(5, 300, 0, CI_LEVEL)


def audit(passed: list[list[bool]], scores: list[list[float | None]]) -> tuple[Truth, pl.DataFrame]:
    """A truth and a judge's candidate scores (None: unscored) from one list per task."""
    rows = [
        (f"t{t:03d}", f"t{t:03d}c{i}", p, s)
        for t, (ps, ss) in enumerate(zip(passed, scores, strict=True))
        for i, (p, s) in enumerate(zip(ps, ss, strict=True))
    ]
    frame = pl.DataFrame(
        rows, schema={"task_id": pl.String, "candidate_id": pl.String, "passed": pl.Boolean,
                      "score": pl.Float64}, orient="row",
    )  # fmt: skip
    truth = Truth("execution", frame.select("task_id", "candidate_id", "passed"),
                  sorted(frame["task_id"].unique().to_list()))  # fmt: skip
    cand = frame.select("task_id", "candidate_id", "score").with_columns(
        pl.col("score").is_not_null().cast(pl.UInt32).alias("n_scored_repeats")
    )
    return truth, cand


def figures(passed: list[list[bool]], scores: list[list[float | None]]) -> dict:
    truth, cand = audit(passed, scores)
    weights = resample_weights(len(truth.tasks), RULE.n_boot, RULE.seed)
    return truth_metrics(cand, truth, 0.8, weights, RULE)


def by_definition(passed: list[list[bool]], scores: list[list[float | None]]) -> dict:
    """docs/METRICS.md's definitions, written out with Python's statistics, task by task."""
    num = den = 0.0
    rates = {"right": 0.0, "inverted": 0.0, "tied": 0.0, "unscored": 0.0}
    n_split = n_unsplit = n_noisy = 0
    for ps, ss in zip(passed, scores, strict=True):
        given = [s for s in ss if s is not None]
        mean = sum(given) / len(given) if given else 0.0
        sd = (sum((s - mean) ** 2 for s in given) / len(given)) ** 0.5 if given else 0.0
        a = [0.0 if s is None or sd == 0 else (s - mean) / sd for s in ss]
        share = sum(ps) / len(ps)
        split = 0 < share < 1
        b_sd = (share * (1 - share)) ** 0.5
        b = [((1.0 if p else 0.0) - share) / b_sd if split else 0.0 for p in ps]
        num += sum(x * y for x, y in zip(a, b, strict=True)) / len(ps)
        push = sum(x * x for x in a) / len(ps)
        den += 1.0 if split else push
        if not split:
            n_unsplit += 1
            n_noisy += push > 1e-9
            continue
        n_split += 1
        pairs = [(i, j) for i in range(len(ps)) for j in range(len(ps)) if ps[i] and not ps[j]]
        for i, j in pairs:
            si, sj = ss[i], ss[j]
            key = ("unscored" if si is None or sj is None else
                   "right" if si > sj else "inverted" if si < sj else "tied")  # fmt: skip
            rates[key] += 1 / len(pairs)
    return {
        "signal_fidelity": num / den,
        **{f"{k}_pair_rate": v / n_split for k, v in rates.items()},
        "noise_group_rate": n_noisy / n_unsplit,
    }


def random_audit(seed: int, n_tasks: int = 60) -> tuple[list[list[bool]], list[list[float | None]]]:
    """Tasks of 3 to 8 candidates, some all-pass or all-fail, a judge with coarse (tied)
    scores that leans towards the tests, and about 10 % of its scores missing."""
    rng = np.random.default_rng(seed)
    passed, scores = [], []
    for _ in range(n_tasks):
        k = int(rng.integers(3, 9))
        rate = rng.choice([0.0, 1.0, rng.random()], p=[0.2, 0.1, 0.7])
        ps = [bool(x) for x in rng.random(k) < rate]
        ss = [None if rng.random() < 0.1 else
              float(np.round(np.clip(0.4 + 0.3 * p + 0.3 * rng.standard_normal(), 0, 1) * 4) / 4)
              for p in ps]  # fmt: skip
        passed.append(ps)
        scores.append(ss)
    return passed, scores


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_signal_figure_is_its_definition(seed: int) -> None:
    passed, scores = random_audit(seed)
    got = figures(passed, scores)
    want = by_definition(passed, scores)
    for name in SIGNAL:
        assert got[name] == pytest.approx(want[name], abs=1e-9), name
    rates = [got[f"{k}_pair_rate"] for k in ("right", "inverted", "tied", "unscored")]
    assert sum(rates) == pytest.approx(1.0)
    assert got["n_split_groups"] + got["n_unsplit_groups"] == len(passed)


def test_known_judges_take_their_known_values() -> None:
    passed, _ = random_audit(3)
    tests = [[float(p) for p in ps] for ps in passed]
    assert figures(passed, tests)["signal_fidelity"] == pytest.approx(1.0)
    inverted = [[1.0 - s for s in ss] for ss in tests]
    assert figures(passed, inverted)["signal_fidelity"] == pytest.approx(-1.0)
    flat = figures(passed, [[0.5] * len(ps) for ps in passed])
    assert flat["signal_fidelity"] == 0.0 and flat["tied_pair_rate"] == 1.0
    assert flat["noise_group_rate"] == 0.0
    silent = figures(passed, [[None] * len(ps) for ps in passed])
    assert silent["signal_fidelity"] == 0.0 and silent["unscored_pair_rate"] == 1.0
    # the tests' own ranking, plus noise in every group the tests do not split: penalised
    noisy = [[float(p) + (0.1 * i if all(ps) or not any(ps) else 0.0) for i, p in enumerate(ps)]
             for ps in passed]  # fmt: skip
    m = figures(passed, noisy)
    n_split, n_unsplit = m["n_split_groups"], m["n_unsplit_groups"]
    assert m["signal_fidelity"] == pytest.approx(n_split / (n_split + n_unsplit))
    assert m["noise_group_rate"] == 1.0 and m["right_pair_rate"] == 1.0


def test_a_blind_judge_that_ties_sits_at_zero_where_strict_pairwise_sits_below_half() -> None:
    """The chance level: a judge whose scores ignore the tests, on three levels (many ties),
    over 1,500 tasks. Signal fidelity's CI covers 0 and right = inverted within noise; strict
    pairwise accuracy, which scores a tie as wrong, lands far below its nominal 0.5."""
    rng = np.random.default_rng(11)
    passed = [[bool(x) for x in rng.random(4) < rng.random()] for _ in range(1500)]
    blind = [[float(rng.integers(0, 3)) / 2 for _ in ps] for ps in passed]
    m = figures(passed, blind)
    assert m["signal_fidelity_ci_low"] < 0 < m["signal_fidelity_ci_high"]
    assert abs(m["signal_fidelity"]) < 0.04
    assert abs(m["right_pair_rate"] - m["inverted_pair_rate"]) < 0.04
    assert m["tied_pair_rate"] > 0.25
    assert m["pairwise_accuracy_strict"] < 0.4


def test_a_ci_only_from_enough_weighted_tasks() -> None:
    """n behind signal fidelity counts the tasks with a weight: split tasks, and unsplit ones
    where the judge pushes. Four of each: n = 4 + the noisy unsplit ones, below the minimum
    of 5 only when the judge is flat on the unsplit tasks."""
    split = [[True, False, True, False]] * 4
    unsplit = [[False] * 4] * 4
    flat_there = figures(split + unsplit, [[0.9, 0.1, 0.8, 0.2]] * 4 + [[0.5] * 4] * 4)
    assert flat_there["signal_fidelity_n_groups"] == 4
    assert flat_there["signal_fidelity_ci_low"] is None
    pushes_there = figures(split + unsplit, [[0.9, 0.1, 0.8, 0.2]] * 4 + [[0.1, 0.9, 0.5, 0.2]] * 4)
    assert pushes_there["signal_fidelity_n_groups"] == 8
    assert pushes_there["signal_fidelity"] == pytest.approx(flat_there["signal_fidelity"] / 2)
