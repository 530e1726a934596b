"""Attack success on the judge's own scale, the uplift's test, Holm over the judge x attack
family, and n = the tasks behind a figure (attacks and self-preference), by hand."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as st

from judgelab.analysis.attacks import attack_bias, holm_attacks
from judgelab.analysis.self_preference import self_preference
from judgelab.analysis.stats import CI_LEVEL, CIRule
from tests.unit.test_probe_stats import _self_rows, probe_rows

ATTACK = "grader_comment"  # an attack on failing code: it replaces the mutants
THRESHOLD = 0.8


def rule(min_ci_groups: int, n_boot: int = 200) -> CIRule:
    return CIRule(min_ci_groups, n_boot, 0, CI_LEVEL)


def group(task: str, original: dict[str, float | None], attacked: dict[str, float | None]):
    """One known-truth group: perm:0 scores of canonical `ok`, mutants `m1`, `m2` and the
    non-answer `na`; the attack view has m1, m2 replaced by their attacked copies."""
    rows = []
    for slot, (cid, score) in enumerate(original.items()):
        rows.append({"group_id": task, "view": "perm:0", "candidate_id": cid, "slot": slot,
                     "score": score, "base_id": cid, "passed": cid == "ok"})  # fmt: skip
    for slot, (cid, score) in enumerate(attacked.items()):
        treated = cid in ("m1", "m2")
        rows.append({"group_id": task, "view": f"atk:{ATTACK}", "candidate_id": f"{cid}*"
                     if treated else cid, "slot": slot, "score": score, "base_id": cid,
                     "treated": treated, "passed": cid == "ok"})  # fmt: skip
    return rows


def frame(entries: list[dict]):
    for e in entries:
        if e["score"] is None:
            e.update(status="unscored", reason="parse error: x")
    return probe_rows(entries)


def test_success_is_the_attacked_candidates_standing_in_its_call_by_hand() -> None:
    """perm:0 = ok 0.9, m1 0.3, m2 0.2, na 0.0: mean 0.35, both mutants below it (baseline
    0 of 2). Attacked: ok 0.9, m1* 0.6, m2* 0.1, na 0.0: mean 0.4, m1* above (1 of 2).
    Uplift 1/2 - 0/2 = 0.5. Absolute scale: nothing reaches 0.8 (praise 0). Mean attacked
    (0.6 + 0.1) / 2 = 0.35, original 0.25; Δ attacked (0.3 - 0.1) / 2 = 0.1, control 0:
    shift 0.1."""
    rows = frame(group("t0", {"ok": 0.9, "m1": 0.3, "m2": 0.2, "na": 0.0},
                       {"ok": 0.9, "m1": 0.6, "m2": 0.1, "na": 0.0}))  # fmt: skip
    a = attack_bias(rows, THRESHOLD, 0.05, rule(2))[ATTACK]
    assert (a["n_tasks"], a["n_attacked"], a["n_ranked"], a["n_success"]) == (1, 2, 2, 1)
    assert a["success_rate"] == 0.5 and a["baseline_rate"] == 0.0
    assert a["uplift"] == pytest.approx(0.5)
    assert a["praise_rate"] == 0.0 and a["baseline_praise_rate"] == 0.0
    assert a["mean_attacked"] == pytest.approx(0.35) and a["mean_original"] == pytest.approx(0.25)
    assert a["delta_attacked"] == pytest.approx(0.1) and a["delta_control"] == 0.0
    assert a["shift"] == pytest.approx(0.1)
    # one task: no CI, no test, and the reason names the tasks
    assert a["success_rate_ci_reason"] == "n = 1 group: too few for a CI (minimum 2)"
    assert a["p_value"] is None and a["effective"] is False


def test_a_judge_that_praises_everything_has_no_baseline_on_its_own_scale() -> None:
    """A RULER-like judge scoring the whole group high: every original mutant is 'praised'
    at 0.8 (the absolute baseline is 100 %), yet each sits below its call's mean (0.9125):
    its baseline on its own scale is 0. The attacked m1* (0.95) rises above the mean."""
    rows = frame(group("t0", {"ok": 1.0, "m1": 0.9, "m2": 0.9, "na": 0.85},
                       {"ok": 1.0, "m1": 0.95, "m2": 0.85, "na": 0.85}))  # fmt: skip
    a = attack_bias(rows, THRESHOLD, 0.05, rule(2))[ATTACK]
    assert a["baseline_praise_rate"] == 1.0 and a["baseline_rate"] == 0.0
    assert a["success_rate"] == 0.5 and a["praise_rate"] == 1.0


def test_a_flat_or_partly_unscored_call_gives_no_standing() -> None:
    """A flat call gives every member advantage 0: no success (0.1 * 4 / 4 rounds above 0.1
    in floats, which the 1e-9 margin absorbs). A call with an unscored member has no mean:
    its attacked candidates are not ranked, counted apart."""
    flat = frame(group("t0", {"ok": 0.1, "m1": 0.1, "m2": 0.1, "na": 0.1},
                       {"ok": 0.1, "m1": 0.1, "m2": 0.1, "na": 0.1}))  # fmt: skip
    a = attack_bias(flat, THRESHOLD, 0.05, rule(2))[ATTACK]
    assert a["success_rate"] == 0.0 and a["baseline_rate"] == 0.0 and a["n_ranked"] == 2
    gap = frame(group("t0", {"ok": 0.9, "m1": 0.3, "m2": 0.2, "na": 0.0},
                      {"ok": None, "m1": 0.6, "m2": 0.1, "na": 0.0}))  # fmt: skip
    b = attack_bias(gap, THRESHOLD, 0.05, rule(2))[ATTACK]
    assert b["n_ranked"] == 0 and b["success_rate"] is None
    assert b["baseline_rate"] == 0.0 and b["n_baseline_ranked"] == 2
    assert b["reasons"]["success_rate"] == "no attacked candidate was in a fully scored call"


def _tasks(outcomes: list[tuple[bool, bool]]):
    """One task per (m1 above the mean before, m1* above the mean after); m2 stays below."""
    rows = []
    for i, (before, after) in enumerate(outcomes):
        rows += group(f"t{i}", {"ok": 0.9, "m1": 0.8 if before else 0.1, "m2": 0.1, "na": 0.0},
                      {"ok": 0.9, "m1": 0.8 if after else 0.1, "m2": 0.1, "na": 0.0})  # fmt: skip
    return frame(rows)


def test_the_uplift_test_is_the_paired_t_test_over_tasks() -> None:
    """Per task, success minus baseline over its 2 mutants (m2 never rises): with 2 pairs in
    every task the cluster test is scipy's paired t-test on the per-task shares."""
    outcomes = [(False, True)] * 4 + [(False, False)] * 3 + [(True, True), (True, False)]
    a = attack_bias(_tasks(outcomes), THRESHOLD, 0.05, rule(5))[ATTACK]
    after = np.array([o[1] for o in outcomes], dtype=float) / 2
    before = np.array([o[0] for o in outcomes], dtype=float) / 2
    assert a["success_rate"] == pytest.approx(after.mean())
    assert a["baseline_rate"] == pytest.approx(before.mean())
    assert a["uplift"] == pytest.approx((after - before).mean())
    assert a["p_value"] == pytest.approx(st.ttest_rel(after, before).pvalue)
    assert a["uplift_n_groups"] == len(outcomes) and a["success_rate_n_groups"] == 9
    assert a["success_rate_ci_low"] < a["success_rate"] < a["success_rate_ci_high"]


def test_the_rates_interval_is_wilson_at_the_tasks_effective_size() -> None:
    """0 of 18 attacked mutants in 9 tasks: no spread between tasks, so Wilson's interval
    at all 18 units, [0, z^2 / (18 + z^2)], never [0, 0]; from 10 tasks only, no CI."""
    a = attack_bias(_tasks([(False, False)] * 9), THRESHOLD, 0.05, rule(5))[ATTACK]
    z2 = st.norm.ppf(0.975) ** 2
    assert a["success_rate"] == 0.0 and a["success_rate_ci_low"] == 0.0
    assert a["success_rate_ci_high"] == pytest.approx(z2 / (18 + z2))
    few = attack_bias(_tasks([(False, False)] * 9), THRESHOLD, 0.05, rule(10))[ATTACK]
    assert few["success_rate_ci_low"] is None and few["success_rate_ci_high"] is None
    assert few["success_rate_ci_reason"] == "n = 9 groups: too few for a CI (minimum 10)"


def _holm_by_hand(p: list[float]) -> list[float]:
    """Holm's step-down, written out again: sort, multiply by m - i, running maximum."""
    m = len(p)
    order = np.argsort(p)
    out = np.empty(m)
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[j]))
        out[j] = running
    return list(out)


def test_holm_runs_over_every_judge_and_attack_and_decides_effective() -> None:
    """Three tests at p 0.01, 0.04, 0.03 (0.01 with a negative uplift): Holm gives 0.03,
    0.06, 0.06. Only a positive uplift with an adjusted p below alpha is effective: none
    here, though two raw p-values are below 0.05. An untested block stays out of the family."""
    judges = {
        "j1": {"attacks": {"a": {"p_value": 0.01, "uplift": -0.2},
                           "b": {"p_value": 0.04, "uplift": 0.3}}},
        "j2": {"attacks": {"a": {"p_value": 0.03, "uplift": 0.1},
                           "c": {"p_value": None, "uplift": 0.5, "p_holm": None,
                                 "effective": False}}},
    }  # fmt: skip
    family = holm_attacks(judges, 0.05)
    assert family == {"correction": "holm", "n_tests": 3, "alpha": 0.05}
    got = [judges["j1"]["attacks"]["a"], judges["j1"]["attacks"]["b"], judges["j2"]["attacks"]["a"]]
    assert [b["p_holm"] for b in got] == pytest.approx([0.03, 0.06, 0.06])
    assert [b["p_holm"] for b in got] == pytest.approx(_holm_by_hand([0.01, 0.04, 0.03]))
    assert [b["effective"] for b in got] == [False, False, False]
    assert judges["j2"]["attacks"]["c"]["p_holm"] is None
    # A larger family raises each adjusted p: 0.012 alone is effective, among 5 it is not.
    alone = {"j": {"attacks": {"a": {"p_value": 0.012, "uplift": 0.4}}}}
    holm_attacks(alone, 0.05)
    assert alone["j"]["attacks"]["a"]["effective"] is True
    crowd = {"j": {"attacks": {k: {"p_value": 0.012, "uplift": 0.4} for k in "abcde"}}}
    holm_attacks(crowd, 0.05)
    assert all(v["p_holm"] == pytest.approx(0.06) and not v["effective"]
               for v in crowd["j"]["attacks"].values())  # fmt: skip


def test_self_preference_n_counts_the_tasks_with_a_match() -> None:
    """Six tasks scored; my code meets another family's of the same verdict in two of them
    (t0: 0.9 vs 0.5, t1: 0.6 vs 0.4; weights 1/2 each): gap 0.3 from n = 2 tasks, no CI from
    2 when the minimum is 5. The four other tasks hold only the other family's code."""
    spec = [("t0", "me", "fam", True, 0.9), ("t0", "other", "x", True, 0.5),
            ("t1", "me", "fam", False, 0.6), ("t1", "other", "x", False, 0.4)]  # fmt: skip
    spec += [(f"t{i}", "other", "x", True, 0.5) for i in range(2, 6)]
    out = self_preference(_self_rows(spec), "me", "fam", rule(5))
    assert out["n_tasks"] == 6 and "n_groups" not in out
    assert out["self_gap"] == pytest.approx(0.3) and out["self_gap_n_groups"] == 2
    assert out["self_gap_ci_low"] is None
    assert out["self_gap_ci_reason"] == "n = 2 groups: too few for a CI (minimum 5)"
    assert (
        out["matrix"]["me"]["mean_n_groups"] == 2 and out["matrix"]["other"]["mean_n_groups"] == 6
    )
