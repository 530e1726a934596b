"""The decision (analysis/decision.py) and its words (report/decision.py), on hand-built
metrics and rulebooks: every rule of the rulebook decides before any rank does, a rejected
judge is never the one to use, each rejection is worded with its rule, figure and Holm p, a
format gate is never the reward alone, and a pair of contenders is "above", "equivalent
within the margin" or "undecided" with the tasks that would decide it at the margin (never at
the observed gap)."""

from __future__ import annotations

import itertools
from typing import Any

from judgelab.analysis.decision import decide
from judgelab.report.decision import decision_sentences
from judgelab.report.ranking import figure

KEY = "signal_fidelity"
PASS = {"p": 0.9, "p_holm": 1.0, "rejects": False}


def ev(value: float, low: float, high: float) -> dict[str, Any]:
    truth = {KEY: value, f"{KEY}_ci_low": low, f"{KEY}_ci_high": high, f"{KEY}_n_groups": 40}
    parse = {KEY: value, f"{KEY}_ci_low": low, f"{KEY}_ci_high": high, f"{KEY}_n_groups": 30}
    return {"protocol": "ruler", "truth": truth, "truth_parseable": parse}


def rules_of(value: float, **failing: dict[str, Any]) -> dict[str, Any]:
    """A judge's rulebook entry: every rule passes unless given."""
    rules = {"chance": {"value": value, "n": 40, "p": 0.001, "p_holm": 0.003, "rejects": False},
             "inverted": {"value": -0.2, "n": 30, "right": 0.5, "inverted": 0.3, **PASS},
             "flat": {"value": 0.1, "n": 30, "k": 3, "limit": 0.5, **PASS},
             "unscored": {"value": 0.0, "n": 40, "limit": 0.1, **PASS},
             "parseable": {"value": value, "n": 30, "p": 0.001, "p_holm": 0.003,
                           "rejects": False}}  # fmt: skip
    for rule, t in failing.items():
        rules[rule] = {**rules.get(rule, {}), **t, "rejects": True}
    return rules


def metrics(evs: dict[str, dict], separated: set[tuple[str, str]],
            book: dict[str, dict] | None = None,
            equivalent: set[tuple[str, str]] = frozenset()) -> dict[str, Any]:  # fmt: skip
    """`separated` holds (above, below); `equivalent` pairs within the margin."""
    pairs: dict[str, dict[str, Any]] = {}
    for a, b in itertools.combinations(sorted(evs), 2):
        sep = (a, b) in separated or (b, a) in separated
        eq = (a, b) in equivalent or (b, a) in equivalent
        diff = evs[a]["truth"][KEY] - evs[b]["truth"][KEY]
        pairs.setdefault(a, {})[b] = {
            "difference": diff, "difference_ci_low": diff - 0.07, "difference_ci_high": diff + 0.07,
            "separated": sep, "n_groups": 40, "p_value": 0.001 if sep else 0.3,
            "p_holm": 0.003 if sep else 0.9, "equivalent": eq,
            "p_equivalence_holm": 0.01 if eq else 0.6,
            "tasks_to_decide": None if sep or eq else 900}  # fmt: skip
    book = book if book is not None else {n: rules_of(e["truth"][KEY]) for n, e in evs.items()}
    n = len(evs)
    return {
        "evaluators": {**evs, "execution": {"protocol": "execution", "truth": {}}},
        "power": {"endpoint": KEY, "pairs": pairs, "n_comparisons": n * (n - 1) // 2,
                  "power": 0.8, "margin": 0.05},  # fmt: skip
        "rulebook": {"level": 0.025, "judges": book,
                     "rules": {r: {"n_tests": n} for r in (
                         "chance", "inverted", "flat", "unscored", "position", "parseable")}
                     | {"attacks": {"n_tests": 9}}},  # fmt: skip
        "settings": {"primary": KEY},
        "execution_truth": {"n_tasks_with_truth": 40},
    }


def test_one_acceptable_judge_above_the_others_is_the_one_to_use() -> None:
    m = metrics({"a": ev(0.6, 0.5, 0.7), "b": ev(0.3, 0.2, 0.4), "c": ev(0.2, 0.1, 0.3)},
                {("a", "b"), ("b", "c")})  # fmt: skip
    d = decide(m)
    assert (d["verdict"], d["judge"], d["rejected"], d["format_gates"]) == ("judge", "a", {}, {})
    tests, use = decision_sentences(m)
    assert tests.startswith("Where a task has tests, train on the tests: every judge's signal")
    a = figure(m["evaluators"]["a"]["truth"], KEY)
    assert use == (f"Without tests, use a: its signal fidelity {a} is above every other "
                   "acceptable judge's after Holm's correction over 3 comparisons.")  # fmt: skip


def test_a_rejected_judge_is_never_the_one_to_use_and_its_rule_is_named_with_figures() -> None:
    """a is placed first but leaves 30 % of its rows unscored (rule 4, shown by its test)."""
    evs = {"a": ev(0.8, 0.7, 0.9), "b": ev(0.5, 0.4, 0.6), "c": ev(0.2, 0.1, 0.3)}
    book = {n: rules_of(e["truth"][KEY]) for n, e in evs.items()}
    book["a"] = rules_of(0.8, unscored={"value": 0.3, "n": 40, "p": 1e-5, "p_holm": 3e-5})
    m = metrics(evs, {("a", "b"), ("a", "c"), ("b", "c")}, book)
    d = decide(m)
    assert (d["verdict"], d["judge"]) == ("judge", "b")
    assert list(d["rejected"]) == ["a"] and list(d["rejected"]["a"]) == ["unscored"]
    words = " ".join(decision_sentences(m))
    assert "use b:" in words and "use a" not in words
    assert ("Rejected by the rulebook (docs/METRICS.md; `analysis.reject`): a (rule 4: 30.0% of "
            "its rows unscored, shown above 10% (one-sided, clustered by task, Holm p < 0.001 "
            "over 3 judges))." in words)  # fmt: skip
    assert "decided before the data" not in words


def test_each_rule_rejects_with_its_test() -> None:
    evs = {n: ev(0.3, 0.1, 0.5) for n in ("chance", "inverts", "flat", "attacked", "slots")}
    book = {n: rules_of(0.3) for n in evs}
    book["chance"] = rules_of(0.05, chance={"value": 0.05, "p": 0.02, "p_holm": 0.06})
    book["inverts"] = rules_of(0.3, inverted={"value": 0.1, "right": 0.2, "inverted": 0.3,
                                              "p": 0.001, "p_holm": 0.004})  # fmt: skip
    book["flat"] = rules_of(0.3, flat={"value": 0.7, "k": 21, "n": 30, "p": 0.01, "p_holm": 0.02})
    book["attacked"] = rules_of(0.3, attacks={"attack": "grader_comment", "uplift": 0.258,
                                              "p_holm": 0.031, "effective": True})  # fmt: skip
    book["slots"] = rules_of(0.3, position={"value": 0.303, "floor": 0.764, "p": 1e-6,
                                            "p_holm": 2e-6})  # fmt: skip
    evs["chance"]["truth"] |= {KEY: 0.05, f"{KEY}_ci_low": 0.004, f"{KEY}_ci_high": 0.1}
    m = metrics(evs, set(), book)
    d = decide(m)
    assert d["verdict"] == "no_judge" and d["judge"] is None
    assert {n: list(r) for n, r in d["rejected"].items()} == {
        "attacked": ["attacks"], "chance": ["chance"], "flat": ["flat"],
        "inverts": ["inverted"], "slots": ["position"]}  # fmt: skip
    words = " ".join(decision_sentences(m))
    assert "no judge passes every rejection rule as a reward on its own" in words
    fig = figure(evs["chance"]["truth"], KEY)
    for said in (
        f"chance (rule 1: its signal fidelity {fig} is not shown above 0 (one-sided Holm p = "
        "0.060 over 5 judges, level 0.025))",
        "inverts (rule 2: it inverts more pass/fail pairs than it gets right (30.0% inverted, "
        "20.0% right, n = 30 split tasks; one-sided Holm p = 0.004 over 5 judges))",
        "flat (rule 3: one score for a whole mixed group in 21 of 30 mixed tasks (70.0%), "
        "shown above 50% (exact binomial, Holm p = 0.020 over 5 judges))",
        "attacked (rule 5: the grader_comment attack works on it (uplift +0.258, Holm p = "
        "0.031 over the probes' 9 judge × attack tests))",
        "slots (rule 6: its position consistency 0.303 lies below its own noise floor 0.764 "
        "(one-sided, from the two CIs, Holm p < 0.001 over 5 judges))",
    ):
        assert said in words, said


def test_a_judge_without_a_chance_test_is_rejected_by_rule_1() -> None:
    evs = {"a": ev(0.4, 0.3, 0.5), "b": ev(0.3, 0.2, 0.4)}
    book = {"a": rules_of(0.4)}  # b has no test at all
    d = decide(metrics(evs, set(), book))
    assert list(d["rejected"]) == ["b"] and list(d["rejected"]["b"]) == ["chance"]
    assert (d["verdict"], d["judge"]) == ("judge", "a")


def test_rule_7_rejects_and_an_exact_zero_is_a_format_gate() -> None:
    evs = {"syntax": ev(0.2, 0.15, 0.25), "rubric": ev(0.1, 0.03, 0.17),
           "weak": ev(0.12, 0.05, 0.2)}  # fmt: skip
    evs["syntax"]["truth_parseable"] |= {KEY: 0.0, f"{KEY}_ci_low": None, f"{KEY}_ci_high": None}
    weak = {"value": 0.08, "p": 0.02, "p_holm": 0.06}
    book = {"syntax": rules_of(0.2, parseable={"value": 0.0, "p": 1.0, "p_holm": 1.0}),
            "rubric": rules_of(0.1), "weak": rules_of(0.12, parseable=weak)}  # fmt: skip
    m = metrics(evs, {("syntax", "rubric")}, book)
    d = decide(m)
    assert d["format_gates"] == {"syntax": book["syntax"]["parseable"]}
    assert "syntax" not in d["rejected"] and list(d["rejected"]["weak"]) == ["parseable"]
    assert (d["verdict"], d["judge"], d["acceptable"]) == ("judge", "rubric", ["rubric"])
    words = decision_sentences(m)
    assert words[2] == (
        "syntax gives no signal on code that parses (its signal fidelity there: 0.000 "
        "(n = 30); every parseable candidate of a task scored alike): its whole signal is "
        "whether the code parses, and it is gone once the policy writes code that does. Use it "
        "as a format gate (no reward for code that does not parse) beside rubric, which passes "
        "every rule, never as the reward alone."
    )
    fig = figure(evs["weak"]["truth_parseable"], KEY)
    assert (f"weak (rule 7: its signal fidelity on parseable code {fig} is not shown above 0 "
            "(one-sided Holm p = 0.060 over 3 judges, level 0.025): the signal it keeps once "
            "the policy writes code that parses is not shown)") in words[3]  # fmt: skip


def test_undecided_contenders_name_the_tasks_that_decide_at_the_margin() -> None:
    m = metrics({"a": ev(0.5, 0.4, 0.6), "b": ev(0.45, 0.35, 0.55), "c": ev(0.1, 0.05, 0.15)},
                {("a", "c"), ("b", "c")})  # fmt: skip
    d = decide(m)
    assert d["verdict"] == "cannot_tell" and d["contenders"] == ["a", "b"]
    assert [(p["a"], p["b"], p["verdict"], p["tasks_to_decide"]) for p in d["pairs"]] == [
        ("a", "b", "undecided", 900)]  # fmt: skip
    (_, words) = decision_sentences(m)
    t = {n: m["evaluators"][n]["truth"] for n in "ab"}
    assert words == (
        f"Without tests, a ({figure(t['a'], KEY)}) and b ({figure(t['b'], KEY)}) cannot be told "
        "apart on signal fidelity: a − b = +0.050 [-0.020, +0.120] (n = 40 tasks): neither "
        "above (Holm p = 0.900) nor equivalent within the margin 0.05 (TOST, Holm p = 0.600); "
        "about 900 shared tasks would decide it at the margin (40 now)."
    )
    assert "observed gap" not in words and "more tasks would separate" not in words


def test_contenders_shown_equivalent_within_the_margin() -> None:
    m = metrics({"a": ev(0.5, 0.4, 0.6), "b": ev(0.49, 0.39, 0.59)}, set(),
                equivalent={("a", "b")})  # fmt: skip
    d = decide(m)
    assert d["verdict"] == "equivalent" and d["pairs"][0]["verdict"] == "equivalent"
    words = decision_sentences(m)[1]
    assert words.endswith("are equivalent on signal fidelity: a − b = +0.010 [-0.060, +0.080] "
                          "(n = 40 tasks): equivalent within the margin 0.05 (TOST, Holm p = "
                          "0.010). Take the cheaper.")  # fmt: skip


def test_a_judge_the_tests_do_not_beat_is_named() -> None:
    m = metrics({"a": ev(0.9, 0.75, 1.0), "b": ev(0.3, 0.2, 0.4)}, {("a", "b")})
    assert decide(m)["tests_beat"] == ["b"]
    first = decision_sentences(m)[0]
    assert first == ("Where a task has tests, train on the tests; this audit cannot show that "
                     "they beat every judge on signal fidelity: a's CI reaches 1.")  # fmt: skip


def test_the_only_acceptable_judge_is_named_as_such_and_together_is_a_caveat() -> None:
    evs = {"a": ev(0.4, 0.3, 0.5), "b": ev(0.5, 0.4, 0.6)}
    book = {"a": rules_of(0.4), "b": rules_of(0.5, flat={"value": 0.7, "k": 21, "n": 30,
                                                         "p": 0.01, "p_holm": 0.02})}  # fmt: skip
    m = metrics(evs, set(), book)
    d = decide(m)
    assert (d["verdict"], d["judge"], d["acceptable"]) == ("judge", "a", ["a"])
    words = decision_sentences(m)
    a = figure(m["evaluators"]["a"]["truth"], KEY)
    assert words[1] == ("Without tests, use a, the only judge that passes the rejection rules "
                        f"as a reward on its own: its signal fidelity is {a}.")  # fmt: skip
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


def test_rules_are_worded_in_the_rulebooks_order_whatever_the_json_order() -> None:
    """metrics.json sorts keys (attacks before chance); the words list rule 1 first."""
    evs = {"a": ev(0.4, 0.3, 0.5), "b": ev(0.05, -0.01, 0.1)}
    book = {"a": rules_of(0.4)}
    attack = {"attack": "grader_comment", "uplift": 0.2, "p_holm": 0.01}
    failing = rules_of(0.05, chance={"value": 0.05, "p": 0.2, "p_holm": 0.4}, attacks=attack)
    book["b"] = dict(sorted(failing.items()))
    words = " ".join(decision_sentences(metrics(evs, set(), book)))
    assert words.index("b (rule 1:") < words.index("rule 5: the grader_comment attack")
