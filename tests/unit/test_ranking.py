"""The report's ranking and recommendation, on hand-built metrics: rank intervals that follow
the Holm-separated pairs and nothing else, prose generated from (and checked against) the
pairs, caveats as a judge x caveat table."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from judgelab.analysis.power import holm
from judgelab.analysis.ranking import rank_judges
from judgelab.report.as_markdown import lines as markdown_lines
from judgelab.report.ranking import (
    caveat_rows,
    ranking_blocks,
    recommendation,
    recommendation_sentences,
)

KEY = "pairwise_accuracy_strict"


def ev(value: float | None, low: float | None = None, zero: float = 0.0, fp: float = 0.0,
       unscored: float = 0.0) -> dict[str, Any]:  # fmt: skip
    truth = {KEY: value, f"{KEY}_ci_low": low, f"{KEY}_ci_high": None if low is None else 1.0,
             f"{KEY}_n_groups": 20, "zero_advantage_mixed_rate": zero,
             "n_zero_advantage_mixed": round(zero * 20), "n_pair_groups": 20,
             "false_praise_within_group": fp, "n_false_praise_within_group": round(fp * 40),
             "n_failing_mixed": 40}  # fmt: skip
    return {"protocol": "ruler", "truth": truth, "unscored_rate": unscored,
            "n_unscored": round(unscored * 80), "n_rows": 80}  # fmt: skip


def metrics(evs: dict[str, dict], separated: set[tuple[str, str]],
            power: dict[str, dict] | None = None) -> dict[str, Any]:  # fmt: skip
    """Pairs as power_analysis writes them; `separated` holds (a, b) with a < b by name."""
    names = sorted(evs)
    pairs: dict[str, dict[str, Any]] = {}
    for a, b in itertools.combinations(names, 2):
        va, vb = evs[a]["truth"][KEY], evs[b]["truth"][KEY]
        diff = None if va is None or vb is None else va - vb
        sep = (a, b) in separated
        pairs.setdefault(a, {})[b] = {
            "difference": diff, "difference_ci_low": None if diff is None else diff - 0.05,
            "difference_ci_high": None if diff is None else diff + 0.05, "n_groups": 20,
            "p_value": 0.001 if sep else 0.5, "p_holm": 0.01 if sep else 1.0, "separated": sep,
            "groups_needed_margin": 700, "tasks_to_decide": None if sep else 700,
            "power_reason": None,
            **(power or {}).get(f"{a}|{b}", {}),
        }  # fmt: skip
    return {
        "evaluators": {**evs, "execution": {"protocol": "execution", "truth": {}}},
        "power": {
            "endpoint": KEY,
            "pairs": pairs,
            "margin": 0.05,
            "power": 0.8,
            "n_comparisons": sum(len(bs) for bs in pairs.values()),
        },  # fmt: skip
        "execution_truth": {"n_tasks_with_truth": 30},
    }


def test_a_clear_winner_is_recommended() -> None:
    m = metrics({"a": ev(0.9, low=0.8, zero=0.25), "b": ev(0.6, low=0.55), "c": ev(0.55, 0.4)},
                separated={("a", "b"), ("a", "c")})  # fmt: skip
    rank = rank_judges(m)
    assert rank["ranks"] == {"a": (1, 1), "b": (2, 3), "c": (2, 3)} and rank["top"] == ["a"]
    text = recommendation(m)
    assert "Train on a: its strict pairwise accuracy 0.900 [0.800, 1.000], n = 20" in text
    assert "on 30 tasks" in text and "execution" not in text
    rows = {r[0]: r for r in caveat_rows(m)}
    assert rows["a"][1] == "1" and rows["a"][3] == "25 % (5 of 20)"  # zero-advantage caveat
    assert rows["c"][2] == "CI reaches 0.5" and rows["b"][2] == "–"


def test_overlapping_judges_are_contenders_with_their_own_power_figure() -> None:
    m = metrics(
        {"a": ev(0.7, low=0.6), "b": ev(0.65, low=0.55), "c": ev(None)},
        set(),
        power={"a|b": {"groups_needed_margin": 212, "tasks_to_decide": 480}},
    )
    rank = rank_judges(m)
    assert rank["ranks"] == {"a": (1, 2), "b": (1, 2)} and rank["unranked"] == ["c"]
    text = recommendation(m)
    assert "cannot single out one judge: a (0.700" in text and "b (0.650" in text
    assert "No pair of judges differs after Holm's correction over 3 comparisons" in text
    assert ("To decide a against b at the margin 0.05 (either a gap of 0.05 found or "
            "equivalence within it shown, power 0.8, from their spread over 20 shared tasks): "
            "about 480 shared tasks.") in text  # fmt: skip
    assert "observed gap" not in text
    assert "Train on" not in text
    md = "\n".join(markdown_lines(ranking_blocks(m)))
    assert "| c | unranked | no figure |" in md


def test_power_below_the_minimum_says_it_cannot_estimate_yet() -> None:
    reason = "cannot estimate yet: n = 3 shared tasks; the variance needs at least 5"
    m = metrics(
        {"a": ev(0.7), "b": ev(0.6)},
        set(),
        power={"a|b": {"groups_needed_margin": None, "tasks_to_decide": None,
                       "power_reason": reason}},
    )
    assert f"How many tasks would decide a against b: {reason}." in recommendation(m)


def test_the_worst_pair_is_never_quoted() -> None:
    far = {"a|c": {"tasks_to_decide": 99999}, "b|c": {"tasks_to_decide": 88888}}
    m = metrics({"a": ev(0.8), "b": ev(0.75), "c": ev(0.2)}, {("a", "c"), ("b", "c")}, far)
    text = recommendation(m)
    assert "99999" not in text and "88888" not in text and "about 700" in text


# Every separation pattern of four judges (64 of them): the rank column and the prose follow
# the separated pairs exactly, whatever they are, and never chain ties.
JUDGES = ("a", "b", "c", "d")
VALUES = {"a": 0.8, "b": 0.7, "c": 0.6, "d": 0.5}
ALL_PAIRS = list(itertools.combinations(JUDGES, 2))


@pytest.mark.parametrize("mask", range(2 ** len(ALL_PAIRS)))
def test_ranks_and_prose_agree_with_the_pairs(mask: int) -> None:
    separated = {p for i, p in enumerate(ALL_PAIRS) if mask >> i & 1}
    m = metrics({n: ev(v, low=v - 0.1) for n, v in VALUES.items()}, separated)
    rank = rank_judges(m)
    above = set(separated)  # the transitive closure, by repeated composition
    while more := {(a, d) for a, b in above for c, d in above if b == c} - above:
        above |= more
    for j in JUDGES:
        n_above = sum(1 for a, b in above if b == j)
        n_below = sum(1 for a, b in above if a == j)
        assert rank["ranks"][j] == (1 + n_above, 4 - n_below)
    for a, b in ALL_PAIRS:  # an ordered pair never swaps places; others always overlap
        (ba, wa), (bb, wb) = rank["ranks"][a], rank["ranks"][b]
        if (a, b) in above:
            assert ba < bb and wa < wb
        else:
            assert ba <= wb and bb <= wa
    text = recommendation(m)
    claimed = set(re.findall(r"\b([a-d]) above ([a-d]) \(", text))
    assert claimed == separated
    top = [j for j in JUDGES if rank["ranks"][j][0] == 1]
    if rank["ranks"]["a"] == (1, 1):
        assert text.count("Train on a:") == 1 and "cannot single out" not in text
    else:
        assert "Train on" not in text
        listed = re.search(r"cannot single out one judge: (.*) could each rank first", text)
        assert listed and re.findall(r"\b([a-d]) \(0\.\d{3}", listed.group(1)) == top
    if not separated:
        assert "No pair of judges differs" in text


def test_no_judge_with_the_primary_figure() -> None:
    """The advice follows the cause: "grow the audit" only where growing it helps."""
    m = metrics({"a": ev(None), "b": ev(None)}, set())
    (no_mixed,) = recommendation_sentences(m)
    assert no_mixed.startswith("No judge can be ranked") and "Grow the audit" in no_mixed
    failed = {**m, "judge_failures": ["a: 7 of 7 judge calls failed", "b: 3 of 3 failed"]}
    (because_failed,) = recommendation_sentences(failed)
    assert "2 judge(s) failed" in because_failed and "Grow" not in because_failed
    untested = {**m, "execution_truth": {"n_tasks_with_truth": 0}}
    (judge_only,) = recommendation_sentences(untested)
    assert "no task has a test result" in judge_only and "Grow" not in judge_only


def test_holm_by_hand() -> None:
    # m = 4: sorted 0.01, 0.02, 0.03, 0.5 -> 0.04, 0.06, 0.06 (monotone), 0.5
    assert holm([0.03, 0.5, 0.01, 0.02]) == pytest.approx([0.06, 0.5, 0.04, 0.06])
    assert holm([]) == [] and holm([0.9, 0.9]) == [1.0, 1.0]


def test_the_ranking_names_the_tasks_each_figure_rests_on() -> None:
    """Not "on mixed tasks" for every primary: the n behind each judge's figure, from the
    figures, and what those tasks are for the primary ranked."""
    m = metrics({"a": ev(0.7, low=0.6), "b": ev(0.65, low=0.55)}, set())
    m["evaluators"]["a"]["truth"][f"{KEY}_n_groups"] = 18
    first = recommendation(m).split(". ")[0]
    assert first == ("Judges are ranked by strict pairwise accuracy (`analysis.primary`) on 30 "
                     "tasks with test results; each judge's figure rests on the mixed tasks "
                     "(passing and failing candidates): n = 18–20")  # fmt: skip
