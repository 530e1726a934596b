"""The decision's self-test (analysis/decision_selftest.py), small: the planted gap is the
margin, the audit's rule-1 test is the one-sample t-test of its per-task signal (every
planted task weighs 1 where it is split), and the tallies come out of the real decision."""

from __future__ import annotations

import numpy as np
import pytest

from judgelab.analysis.decision_selftest import (
    BASE,
    BLIND,
    DecisionSelftestSettings,
    audit_metrics,
    planted_gap,
    run_decision_selftest,
)
from judgelab.analysis.inference import ratio_above
from judgelab.analysis.selftest import judge_parts, simulate_groups
from judgelab.analysis.stats import CI_LEVEL, CIRule

SMALL = DecisionSelftestSettings(audits=12, tasks=(80, 300), truth_tasks=3000)


def test_the_planted_gap_is_the_margin() -> None:
    b, top, bottom = planted_gap(SMALL)
    assert b.signal < BASE.signal and top - bottom == pytest.approx(SMALL.margin, abs=0.004)


def test_rule_1_and_the_pairs_in_a_planted_audit() -> None:
    """Rule 1 is inference.ratio_above (tested against scipy in test_inference.py) on each
    judge's per-task signal parts, Holm over the four judges by hand; the pairs carry the
    verdicts decide() reads."""
    rng = np.random.default_rng(1)
    passed = simulate_groups(200, 4, rng)
    judges = {"a": BASE, "a twin": BASE, "b": BASE, "blind": BLIND}
    parts = {name: judge_parts(j, passed, rng) for name, j in judges.items()}
    m = audit_metrics(parts, 0.05, CIRule(15, 0, 0, CI_LEVEL))
    book = m["rulebook"]["judges"]
    raw = {n: ratio_above(p.signal.fid_num, p.signal.fid_den, 0.0, 15)[2] for n, p in parts.items()}
    order = sorted(raw, key=raw.get)
    running = 0.0
    for rank, name in enumerate(order):  # Holm's step-down, by hand
        running = max(running, min(1.0, (4 - rank) * raw[name]))
        assert book[name]["chance"]["p_holm"] == pytest.approx(running)
        assert book[name]["chance"]["rejects"] == (not running < 0.025)
    assert not book["a"]["chance"]["rejects"]  # a real signal at 200 tasks
    pair = m["power"]["pairs"]["a"]["a twin"]
    assert {"separated", "equivalent", "p_equivalence_holm", "tasks_to_decide"} <= set(pair)


def test_the_tallies_are_shares_from_the_decision() -> None:
    result = run_decision_selftest(SMALL)
    assert [r["tasks"] for r in result["rows"]] == [80, 300]
    for r in result["rows"]:
        assert all(0.0 <= r[k] <= 1.0 for k in r if k not in ("tasks", "audits"))
        assert r["blind_named"] <= r["blind_passes_rule_1"] + 1e-12  # named only if it passes
    assert result["rows"][1]["gap_found"] >= result["rows"][0]["gap_found"]
