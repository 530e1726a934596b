"""The report's ranking and recommendation, on hand-built metrics: tiers split only where a
paired CI excludes 0, one judge recommended only when it alone is on top, caveats stated."""

from __future__ import annotations

from typing import Any

from judgelab.analysis.ranking import rank_judges, ranking_markdown, recommendation


def ev(pa: float | None, low: float | None = None, zero: float = 0.0, fp: float = 0.0) -> dict:
    truth = {"pairwise_accuracy": pa, "pairwise_accuracy_ci_low": low, "false_praise_rate": fp}
    return {"protocol": "ruler", "truth": truth, "zero_advantage_rate": zero}


def metrics(evs: dict[str, dict], separated: set[tuple[str, str]], need: int | None = None) -> Any:
    names = sorted(evs)
    pairs: dict[str, dict[str, Any]] = {}
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            pairs.setdefault(a, {})[b] = {"separated": (a, b) in separated}
    evs = {**evs, "execution": {"protocol": "execution", "truth": {}}}
    return {
        "evaluators": evs,
        "power": {"pairs": pairs, "max_groups_needed": need, "margin": 0.1},
        "execution_truth": {"n_tasks_with_truth": 30},
    }


def test_a_clear_winner_is_recommended_with_its_caveats() -> None:
    m = metrics(
        {"a": ev(0.9, low=0.8, zero=0.25), "b": ev(0.6, low=0.55), "c": ev(0.55, low=0.4)},
        separated={("a", "b"), ("a", "c")},
    )
    assert rank_judges(m)["tiers"] == [["a"], ["b", "c"]]  # b vs c not separated: tied
    text = recommendation(m)
    assert text.startswith("Train on a:") and "on 30 tasks" in text
    assert "same score in 25 % of its groups" in text and "execution" not in text


def test_overlapping_judges_are_called_tied_with_what_it_would_take() -> None:
    m = metrics({"a": ev(0.7, low=0.6), "b": ev(0.65, low=0.55), "c": ev(None)}, set(), need=212)
    rank = rank_judges(m)
    assert rank["tiers"] == [["a", "b"]] and rank["unranked"] == ["c"]
    text = recommendation(m)
    assert "cannot decide between a, b" in text and "About 212 tasks" in text
    assert "Train on" not in text
    md = "\n".join(ranking_markdown(m))
    assert "1. a, b" in md and "Unranked (no pairwise accuracy): c." in md


def test_a_tier_needs_separation_from_every_judge_above() -> None:
    # c is separated from b but not from a: it stays in a's tier although b is below a
    m = metrics({"a": ev(0.8), "b": ev(0.75), "c": ev(0.7)}, {("b", "c")})
    assert rank_judges(m)["tiers"] == [["a", "b", "c"]]
    m = metrics({"a": ev(0.8), "b": ev(0.75), "c": ev(0.7)}, {("a", "c"), ("b", "c")})
    assert rank_judges(m)["tiers"] == [["a", "b"], ["c"]]
    assert "not shown above chance" in recommendation(m)  # no CI for a or b


def test_no_mixed_task_means_no_ranking() -> None:
    text = recommendation(metrics({"a": ev(None)}, set()))
    assert text.startswith("No judge can be ranked")


def test_a_leader_not_separated_from_a_lower_judge_is_not_recommended() -> None:
    # b is separated from a (tier 2), c joins b's tier, but a vs c has no CI excluding 0
    m = metrics({"a": ev(0.8, low=0.7), "b": ev(0.7), "c": ev(0.69)}, {("a", "b")})
    assert rank_judges(m)["tiers"] == [["a"], ["b", "c"]]
    text = recommendation(m)
    assert "Train on" not in text and "cannot decide between a, c" in text
