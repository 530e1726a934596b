"""The decision (analysis/decision.py) and its words (report/decision.py), on hand-built
metrics: the rejection rules decide before any rank does, a rejected judge is never the one
to use, "cannot be told apart" names the tasks that would separate the first two, and every
figure a sentence quotes is the metrics' own."""

from __future__ import annotations

import itertools
from typing import Any

from judgelab.analysis.decision import decide
from judgelab.report.decision import decision_sentences
from judgelab.report.ranking import figure

KEY = "signal_fidelity"


def ev(value: float, low: float, high: float, *, right: float = 0.5, inverted: float = 0.2,
       flat: float = 0.1, unscored: float = 0.0) -> dict[str, Any]:  # fmt: skip
    truth = {KEY: value, f"{KEY}_ci_low": low, f"{KEY}_ci_high": high, f"{KEY}_n_groups": 40,
             "right_pair_rate": right, "inverted_pair_rate": inverted,
             "zero_advantage_mixed_rate": flat}  # fmt: skip
    return {"protocol": "ruler", "truth": truth, "unscored_rate": unscored}


def metrics(evs: dict[str, dict], separated: set[tuple[str, str]]) -> dict[str, Any]:
    """`separated` holds (above, below)."""
    pairs: dict[str, dict[str, Any]] = {}
    for a, b in itertools.combinations(sorted(evs), 2):
        sep = (a, b) in separated or (b, a) in separated
        diff = evs[a]["truth"][KEY] - evs[b]["truth"][KEY]
        pairs.setdefault(a, {})[b] = {"difference": diff, "separated": sep, "n_groups": 40,
                                      "groups_needed_observed": 250,
                                      "groups_needed_margin": 300}  # fmt: skip
    return {
        "evaluators": {**evs, "execution": {"protocol": "execution", "truth": {}}},
        "power": {
            "endpoint": KEY,
            "pairs": pairs,
            "n_comparisons": len(evs) * (len(evs) - 1) // 2,
            "power": 0.8,
        },  # fmt: skip
        "settings": {"primary": KEY, "reject": {"max_flat": 0.5, "max_unscored": 0.1}},
        "execution_truth": {"n_tasks_with_truth": 40},
    }


def test_one_acceptable_judge_above_the_others_is_the_one_to_use() -> None:
    m = metrics({"a": ev(0.6, 0.5, 0.7), "b": ev(0.3, 0.2, 0.4), "c": ev(0.2, 0.1, 0.3)},
                {("a", "b"), ("b", "c")})  # fmt: skip
    d = decide(m)
    assert (d["verdict"], d["judge"], d["rejected"]) == ("judge", "a", {})
    tests, use = decision_sentences(m)
    assert tests.startswith("Where a task has tests, train on the tests: every judge's signal")
    assert f"(the closest, a: {figure(m['evaluators']['a']['truth'], KEY)})" in tests
    a = figure(m["evaluators"]["a"]["truth"], KEY)
    assert use == (f"Without tests, use a: its signal fidelity {a} is above every other "
                   "acceptable judge's after Holm's correction over 3 comparisons.")  # fmt: skip


def test_a_rejected_judge_is_never_the_one_to_use_whatever_its_rank() -> None:
    """a is placed first but leaves 30 % unscored; b, above c, is the decision."""
    m = metrics({"a": ev(0.8, 0.7, 0.9, unscored=0.3), "b": ev(0.5, 0.4, 0.6),
                 "c": ev(0.2, 0.1, 0.3)}, {("a", "b"), ("a", "c"), ("b", "c")})  # fmt: skip
    d = decide(m)
    assert (d["verdict"], d["judge"]) == ("judge", "b")
    assert d["rejected"] == {"a": ["more than 10% of its rows unscored"]}
    words = " ".join(decision_sentences(m))
    assert "use b:" in words and "use a" not in words
    assert (
        "Rejected by the rules decided before the data (`analysis.reject`): a (more than" in words
    )


def test_each_rule_rejects() -> None:
    no_ci = ev(0.3, 0.1, 0.5)
    no_ci["truth"][f"{KEY}_ci_low"] = None
    m = metrics({
        "no_ci": no_ci,
        "chance": ev(0.05, -0.02, 0.12),
        "inverts": ev(0.2, 0.1, 0.3, right=0.3, inverted=0.3),
        "flat": ev(0.2, 0.1, 0.3, flat=0.6),
    }, set())  # fmt: skip
    d = decide(m)
    assert d["verdict"] == "no_judge" and d["judge"] is None
    assert d["rejected"] == {
        "chance": ["CI reaches 0"],
        "flat": ["one score for a whole mixed group in more than 50% of them"],
        "inverts": ["inverts at least as many pairs as it gets right"],
        "no_ci": ["no CI (n = 40)"],
    }
    assert "no judge passes the rejection rules: do not train on any of them" in " ".join(
        decision_sentences(m)
    )


def test_judges_that_could_each_be_first_cannot_be_told_apart() -> None:
    m = metrics({"a": ev(0.5, 0.4, 0.6), "b": ev(0.45, 0.35, 0.55), "c": ev(0.1, 0.05, 0.15)},
                {("a", "c"), ("b", "c")})  # fmt: skip
    d = decide(m)
    assert d["verdict"] == "cannot_tell" and d["contenders"] == ["a", "b"]
    assert d["more_tasks"] == {"pair": ["a", "b"], "needed": 250, "have": 40, "more": 210}
    (_, words) = decision_sentences(m)
    t = {n: m["evaluators"][n]["truth"] for n in "ab"}
    assert words == (
        f"Without tests, a ({figure(t['a'], KEY)}) and b ({figure(t['b'], KEY)}) cannot be told "
        "apart on signal fidelity: about 210 more tasks would separate a from b (250 for their "
        "observed gap at power 0.8; they share 40 now)."
    )


def test_a_judge_the_tests_do_not_beat_is_named() -> None:
    m = metrics({"a": ev(0.9, 0.75, 1.0), "b": ev(0.3, 0.2, 0.4)}, {("a", "b")})
    assert decide(m)["tests_beat"] == ["b"]
    first = decision_sentences(m)[0]
    assert first == ("Where a task has tests, train on the tests; this audit cannot show that "
                     "they beat every judge on signal fidelity: a's CI reaches 1.")  # fmt: skip


def test_the_only_acceptable_judge_is_named_as_such_and_together_is_a_caveat() -> None:
    m = metrics({"a": ev(0.4, 0.3, 0.5), "b": ev(0.5, 0.4, 0.6, flat=0.7)}, set())
    d = decide(m)
    assert (d["verdict"], d["judge"], d["acceptable"]) == ("judge", "a", ["a"])
    words = decision_sentences(m)
    a = figure(m["evaluators"]["a"]["truth"], KEY)
    assert words[1] == (f"Without tests, use a, the only judge that passes the rejection rules: "
                        f"its signal fidelity is {a}.")  # fmt: skip
    assert "reference-guided" not in " ".join(words)
    m["population"] = {"headline": "natural", "judged": "together"}
    m["evaluators"]["a"]["protocol"] = m["evaluators"]["b"]["protocol"] = "rubric"
    assert "reference-guided" not in " ".join(decision_sentences(m))  # no judge scores groups
    m["evaluators"]["b"]["protocol"] = "ruler"
    assert decision_sentences(m)[-1] == (
        "The figures of b are reference-guided: it scores a whole group, and each natural group "
        "was judged beside its known-truth contrast group, which GRPO never shows a judge; judge "
        "them apart (`scores.populations: apart`) before acting on them. The other evaluators "
        "score one candidate at a time: the grouping changes nothing they saw."
    )
    m["population"]["judged"] = "apart"
    assert "reference-guided" not in " ".join(decision_sentences(m))
