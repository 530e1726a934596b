"""Planted judges: the tests' verdicts flipped at a known rate, and the shuffled placebo."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from judgelab.analysis.prediction import arm_audit
from judgelab.analysis.stats import CIRule
from judgelab.config.evaluators import SETTINGS, ExecutionSettings, PlantedSettings
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.evaluators.planted import PlantedJudge, SharedTests, flipped, planted_rewards
from judgelab.evaluators.registry import evaluator_class


def test_flip_zero_is_the_tests_and_flip_one_their_inverse() -> None:
    passed = [True, False, None, True]
    ids = ["a", "b", "c", "d"]
    assert planted_rewards(passed, ids, 0.0, False, 0) == [1.0, 0.0, None, 1.0]
    assert planted_rewards(passed, ids, 1.0, False, 0) == [0.0, 1.0, None, 0.0]


def test_realised_flip_rate_matches_the_nominal_and_sets_are_nested() -> None:
    ids = [f"cand-{i}" for i in range(4000)]
    for rate in (0.1, 0.25, 0.5, 0.75):
        share = np.mean([flipped(7, c, rate) for c in ids])
        assert abs(share - rate) < 4 * math.sqrt(rate * (1 - rate) / len(ids))
    low = {c for c in ids if flipped(7, c, 0.1)}
    high = {c for c in ids if flipped(7, c, 0.5)}
    assert low < high  # a candidate flipped at 0.1 is flipped at 0.5 too
    assert {c for c in ids if flipped(8, c, 0.5)} != high  # the seed matters


def test_placebo_keeps_the_group_share_and_leaves_untested_alone() -> None:
    passed = [True, True, False, False, None, False]
    ids = [f"x{i}" for i in range(6)]
    out = planted_rewards(passed, ids, 0.0, True, 3)
    assert out[4] is None
    assert sorted(r for r in out if r is not None) == [0.0, 0.0, 0.0, 1.0, 1.0]
    # over many groups the placebo's reward is independent of the verdict
    agree = []
    for g in range(2000):
        gids = [f"g{g}-{i}" for i in range(4)]
        rewards = planted_rewards([True, True, False, False], gids, 0.0, True, 0)
        agree.append(rewards[0])
    assert abs(np.mean(agree) - 0.5) < 4 * math.sqrt(0.25 / 2000)


def test_planted_is_a_registered_kind_with_its_protocol() -> None:
    assert SETTINGS["planted"] is PlantedSettings
    assert evaluator_class("planted") is PlantedJudge
    assert PlantedJudge.protocol == PlantedSettings.protocol == "planted"


def _synthetic(arms: dict[str, tuple[float, bool]], n_groups: int, seed: int) -> pl.DataFrame:
    """A reward table: `n_groups` groups of 4 (2 pass, 2 fail, one group in 4 all-fail), each
    arm's rewards planted from the verdicts."""
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(n_groups):
        passed = [True, True, False, False] if g % 4 else [False] * 4
        ids = [f"{g}-{i}-{rng.integers(1 << 30)}" for i in range(4)]
        for arm, (flip, shuffle) in arms.items():
            for cid, p, r in zip(ids, passed, planted_rewards(passed, ids, flip, shuffle, 0),
                                 strict=True):  # fmt: skip
                rows.append({"arm": arm, "seed": 0, "task_id": f"t{g}", "candidate_id": cid,
                             "reward": r, "passed": p})  # fmt: skip
    return pl.DataFrame(rows)


def test_audit_figures_known_by_construction() -> None:
    """flip 0 has signal fidelity 1; flip 1, -1; the placebo's CI covers 0; flip 0.5's
    too. Through the analysis's own code (`truth_metrics`)."""
    table = _synthetic({"flip-0": (0.0, False), "flip-1": (1.0, False),
                        "flip-0.5": (0.5, False), "placebo": (0.0, True)}, 60, 1)  # fmt: skip
    audits = arm_audit(table, CIRule(15, 400, 0, 0.95))
    assert audits["flip-0"]["signal_fidelity"] == 1.0
    assert audits["flip-1"]["signal_fidelity"] == -1.0
    for arm in ("placebo", "flip-0.5"):
        low = audits[arm]["signal_fidelity_ci_low"]
        high = audits[arm]["signal_fidelity_ci_high"]
        assert low < 0 < high, (arm, low, high)


def test_planted_judge_runs_the_tests_in_the_sandbox() -> None:
    """End to end on a real task: the reference passes, a wrong answer and a reply without
    code fail; flip 0 rewards as the tests do, flip 1 the reverse."""
    from judgelab.config import HumanEvalSettings
    from judgelab.tasks.humaneval import load_humaneval
    from judgelab.verdicts import Candidate

    [task] = load_humaneval(HumanEvalSettings(ids=["HumanEval/0"]))
    wrong = "def has_close_elements(numbers, threshold):\n    return False\n"
    cands = [
        Candidate(
            task.task_id, "ref", 0, f"```python\n{task.prompt}{task.canonical_solution}\n```"
        ),
        Candidate(task.task_id, "wrong", 1, f"```python\n{wrong}```"),
        Candidate(task.task_id, "none", 2, "I cannot help."),
    ]
    same = PlantedJudge(PlantedSettings(name="p0")).score_group(task, cands)
    inverse = PlantedJudge(PlantedSettings(name="p1", flip=1.0)).score_group(task, cands)
    assert [v.score for v in same] == [1.0, 0.0, 0.0]
    assert [v.score for v in inverse] == [0.0, 1.0, 1.0]
    assert all(v.status == "scored" and v.outcome is None for v in same + inverse)

    # a study's planted arms share one run of the tests per group (`SharedTests`)
    runs = []

    shared = SharedTests(ExecutionSettings(name="execution"))
    original = ExecutionEvaluator.score_group
    try:
        ExecutionEvaluator.score_group = lambda self, *a, **k: (
            runs.append(1) or original(self, *a, **k)
        )  # type: ignore[method-assign]
        arms = [PlantedJudge(PlantedSettings(name=f"p{f}", flip=f), shared) for f in (0, 1)]
        shared_same, shared_inverse = (arm.score_group(task, cands) for arm in arms)
    finally:
        ExecutionEvaluator.score_group = original  # type: ignore[method-assign]
    assert len(runs) == 1
    assert [v.score for v in shared_same] == [1.0, 0.0, 0.0]
    assert [v.score for v in shared_inverse] == [0.0, 1.0, 1.0]
