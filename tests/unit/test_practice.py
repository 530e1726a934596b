"""README's practitioner bullets (`report.practice`): each sentence is said only where the
figures it names bear it out. Hand-made metrics put each condition on both sides."""

from __future__ import annotations

import copy
from typing import Any

from judgelab.report import practice as pr


def fig(value: float, low: float | None, high: float | None, n: int) -> dict[str, Any]:
    reason = None if low is not None else f"n = {n} groups: too few for a CI"
    return {"v": value, "v_ci_low": low, "v_ci_high": high, "v_n_groups": n, "v_ci_reason": reason}


def truth(key: str, value: float, low: float | None, high: float | None, n: int) -> dict:
    return {k.replace("v", key, 1): x for k, x in fig(value, low, high, n).items()}


def judge(protocol: str, sf: tuple, strict: tuple, flat: float = 0.1, unscored: float = 0.0,
          mixed: int = 40) -> dict[str, Any]:  # fmt: skip
    t = {**truth("signal_fidelity", *sf), **truth("pairwise_accuracy_strict", *strict),
         "pairwise_accuracy_strict_n_groups": mixed, "zero_advantage_mixed_rate": flat,
         "n_zero_advantage_mixed": round(flat * mixed), "n_pair_groups": mixed}  # fmt: skip
    return {"protocol": protocol, "truth": t, "unscored_rate": unscored,
            "n_unscored": round(unscored * 100), "n_rows": 100}  # fmt: skip


FLAT = {"value": 0.6, "k": 24, "n": 40, "limit": 0.5, "p": 0.1, "p_holm": 0.01,
        "rejects": True}  # fmt: skip
CHANCE = {"value": 0.02, "n": 50, "p": 0.2, "p_holm": 0.6, "rejects": True}
BOOK = {"level": 0.025, "rules": {"flat": {"n_tests": 4}, "chance": {"n_tests": 4}}}


def metrics() -> dict[str, Any]:
    """Tests beat every judge; the rubric is the only acceptable one; syntax scores higher
    but is flat; ruler-b is flat in most mixed groups; ruler-c is mostly unscored."""
    evs = {
        "execution": {"protocol": "execution", "truth": {}},
        "syntax": judge("rule", (0.30, 0.20, 0.40, 50), (0.2, 0.1, 0.3, 40), flat=0.6),
        "rubric-a": judge("rubric", (0.20, 0.10, 0.30, 50), (0.45, 0.35, 0.55, 40)),
        "ruler-b": judge("ruler", (0.02, -0.01, 0.05, 50), (0.05, 0.0, 0.1, 40), flat=0.9),
        "ruler-c": judge("ruler", (0.01, -0.1, 0.1, 50), (0.3, None, None, 8), unscored=0.7,
                         mixed=8),
    }  # fmt: skip
    decision = {
        "verdict": "judge", "judge": "rubric-a", "primary": "signal_fidelity", "tests": 1.0,
        "acceptable": ["rubric-a"], "contenders": ["syntax", "rubric-a"],
        "tests_beat": ["syntax", "rubric-a", "ruler-b", "ruler-c"],
        "rejected": {"syntax": {"flat": FLAT}, "ruler-b": {"chance": CHANCE},
                     "ruler-c": {"chance": CHANCE}},
        "format_gates": {}, "pairs": [],
    }  # fmt: skip
    power = {"endpoint": "signal_fidelity", "margin": 0.05, "power": 0.8, "pairs": {
        "syntax": {"ruler-b": {"p_value": 0.01, "separated": True, "difference": 0.28},
                   "rubric-a": {"p_value": 0.3, "separated": False, "difference": 0.1,
                                "groups_needed_margin": 400}},
        "rubric-a": {"ruler-c": {"p_value": 0.5, "separated": False, "difference": 0.19,
                                 "groups_needed_margin": 250}},
    }}  # fmt: skip
    return {"evaluators": evs, "decision": decision, "power": power, "rulebook": BOOK,
            "population": {"headline": "natural", "judged": "apart"}}  # fmt: skip


def test_pairs_right_says_below_half_only_when_every_llm_judge_is_below() -> None:
    m = metrics()
    said = pr.pairs_sentence(m)  # every LLM judge below 0.5, but rubric-a's CI reaches it
    assert said == (
        "No LLM judge is shown to get most passing–failing pairs right: each one's strict "
        "pairwise accuracy (a tie counts as wrong) is below 0.5, the highest rubric-a's 0.450 "
        "[0.350, 0.550], n = 40, but rubric-a's CI reaches 0.5 and ruler-c has no CI: the "
        "audit cannot say that none does."
    )  # the highest; syntax is no LLM
    below = copy.deepcopy(m)
    below["evaluators"]["rubric-a"]["truth"]["pairwise_accuracy_strict_ci_high"] = 0.49
    below["evaluators"]["ruler-c"]["truth"] |= {"pairwise_accuracy_strict_ci_low": 0.2,
                                                "pairwise_accuracy_strict_ci_high": 0.4}
    assert (pr.pairs_sentence(below) or "").startswith(
        "No LLM judge gets most passing–failing pairs right: each one's strict pairwise "
        "accuracy (a tie counts as wrong) lies below 0.5 by a valid CI, the highest rubric-a's"
    )
    # a reward function (or a planted judge) is no LLM judge either, however it scores
    m["evaluators"]["fn"] = judge("reward", (0.3, 0.2, 0.4, 50), (0.9, 0.8, 0.95, 40))
    m["evaluators"]["sim"] = judge("planted", (0.3, 0.2, 0.4, 50), (0.7, 0.6, 0.8, 40))
    assert pr.pairs_sentence(m) == said
    m["evaluators"]["rubric-a"]["truth"]["pairwise_accuracy_strict"] = 0.55
    assert pr.pairs_sentence(m) is None  # above 0.5 but not by a valid CI: nothing claimed
    m["evaluators"]["rubric-a"]["truth"]["pairwise_accuracy_strict_ci_low"] = 0.51
    said = pr.pairs_sentence(m)
    assert said is not None and said.startswith("rubric-a gets most") and "by a valid CI" in said


def test_rejected_rewards_that_score_as_high_as_the_named_judge() -> None:
    m = metrics()
    assert pr.rejected_higher_sentence(m) == (
        "syntax (0.300 [0.200, 0.400], n = 50) scores as high on signal fidelity as rubric-a, "
        "the judge the decision names, but is rejected (syntax: rule 3: one score for a whole "
        "mixed group in 24 of 40 mixed tasks (60.0%), shown above 50% (exact binomial, Holm "
        "p = 0.010 over 4 judges))."
    )  # ruler-b is rejected too, but below the rubric
    m["evaluators"]["ruler-b"]["truth"]["signal_fidelity"] = 0.2  # as high: named beside
    said = pr.rejected_higher_sentence(m) or ""
    assert said.startswith("syntax (0.300") and "; ruler-b (0.200" in said
    assert "score as high" in said and "are rejected (syntax: rule 3: one score" in said
    m["decision"]["rejected"] = {}
    assert pr.rejected_higher_sentence(m) is None
    m = metrics()
    m["decision"] |= {"verdict": "cannot_tell", "judge": None}
    assert pr.rejected_higher_sentence(m) is None


def test_unseparated_pairs_quote_the_tasks_each_would_need() -> None:
    m = metrics()
    m["power"]["units"] = "tasks the tests split or where either judge's scores differ"
    m["power"]["pairs"]["syntax"]["rubric-a"]["tasks_to_decide"] = 400
    m["power"]["pairs"]["rubric-a"]["ruler-c"]["tasks_to_decide"] = 250
    assert pr.unseparated_sentence(m) == (
        "The 2 undecided pairs (not separated, not shown equivalent) would each need 250 to "
        "400 shared tasks (tasks the tests split or where either judge's scores differ) to be "
        "decided at the margin 0.05: a gap of the margin found or equivalence within it shown "
        "(from each pair's own spread, power 0.8)."
    )
    assert "mixed tasks" not in (pr.unseparated_sentence(m) or "")
    for pairs in m["power"]["pairs"].values():
        for p in pairs.values():
            p["separated"] = True
    assert pr.unseparated_sentence(m) is None


def test_mostly_unscored_judges_and_their_rank() -> None:
    m = metrics()
    said = pr.unscored_sentence(m) or ""
    assert said.startswith("ruler-c returns no usable score for most candidates (70.0%, 70 of")
    assert "rest on 8 mixed tasks against 40 for the other LLM judges" in said
    # nothing separates ruler-c from the others above it: it could still rank first
    assert "cannot rank first" not in said
    m["power"]["pairs"]["rubric-a"]["ruler-c"] |= {"p_value": 0.001, "separated": True}
    said = pr.unscored_sentence(m) or ""
    assert "counts each unscored candidate as no push" in said and "rank first (rank 2–" in said
    m["decision"]["primary"] = "pairwise_accuracy_strict"  # no such claim for another primary
    assert "no push" not in (pr.unscored_sentence(m) or "")
    m["evaluators"]["ruler-c"]["unscored_rate"] = 0.5
    assert pr.unscored_sentence(m) is None


def probe_judge(acc: float, across: tuple, repeats: tuple, gap: tuple) -> dict[str, Any]:
    return {
        "calibration": truth("order_consistent_accuracy", acc, acc - 0.1, acc + 0.1, 30),
        "position": truth("position_consistency", *across, 30),
        "noise_floor": truth("position_consistency", *repeats, 30),
        "self_preference": {**truth("family_gap", *gap, 19), "family_gap_confounded": False},
    }


def test_probes_say_order_sway_and_family_gap_only_by_valid_cis() -> None:
    probes = {
        "settings": {"tasks": [f"HumanEval/{i}" for i in range(3)]},
        "judges": {
            "ruler-b": probe_judge(0.2, (0.3, 0.2, 0.4), (0.8, 0.7, 0.9), (0.2, 0.1, 0.3)),
            "rubric-a": probe_judge(0.5, (0.6, 0.5, 0.7), (0.65, 0.55, 0.75), (0.1, -0.1, 0.3)),
        },
    }
    said = pr.probes_bullet(probes) or ""
    assert said.startswith("The probes ran on HumanEval/0–2 for rubric-a and ruler-b")
    assert "rubric-a 0.500 [0.400, 0.600], n = 30; ruler-b 0.200" in said  # best first
    assert "The order sways ruler-b" in said and "sways rubric-a" not in said  # CIs overlap
    assert "ruler-b scores code from its own model family above" in said
    assert "rubric-a scores" not in said  # its gap's CI reaches 0
    confounded = copy.deepcopy(probes)
    confounded["judges"]["ruler-b"]["self_preference"]["family_gap_confounded"] = True
    assert "model family" not in (pr.probes_bullet(confounded) or "")
    assert pr.probes_bullet({"judges": {}}) is None
    assert pr._task_span(["HumanEval/0", "HumanEval/2"]) == "2 tasks"


def test_bullets_leave_out_what_has_nothing_to_say() -> None:
    m = metrics()
    heads = [b.split("**")[1] for b in pr.practice_bullets(m, None)]
    assert heads == ["What a practitioner can take from it.", "Where the data stops."]
    block = pr.practice_block(m, None)
    assert block.count("\n- ") == 1 and block.startswith("- **What a practitioner")
