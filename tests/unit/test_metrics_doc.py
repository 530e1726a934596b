"""docs/METRICS.md's worked group of four and its power table are what the definitions give:
each figure recomputed here from the doc's own table (GRPO advantages by training's function,
advantage fidelity by the analysis's, tasks needed by the power module's)."""

from __future__ import annotations

import re
from itertools import product
from pathlib import Path

import polars as pl
import pytest

from judgelab.advantage import group_advantages
from judgelab.analysis.fidelity import task_endpoint
from judgelab.analysis.power import groups_needed
from judgelab.analysis.truth import Truth

DOC = (Path(__file__).resolve().parents[2] / "docs" / "METRICS.md").read_text()


def group() -> dict[str, tuple[bool, float, float]]:
    rows = re.findall(r"^\| ([A-D]) \| (pass|fail) \| ([0-9.]+) \| ([0-9.]+) \|$", DOC, re.M)
    return {c: (t == "pass", float(s1), float(s2)) for c, t, s1, s2 in rows}


def pairs() -> list[tuple[str, str]]:
    g = group()
    return [(p, f) for p, f in product(g, g) if g[p][0] and not g[f][0]]


def test_the_worked_group_is_mixed_with_four_pairs() -> None:
    assert len(group()) == 4
    assert len(pairs()) == 4


def test_pairwise_accuracy_tie_rate_and_the_half_credit_version() -> None:
    g = group()
    right = sum(g[p][1] > g[f][1] for p, f in pairs())
    ties = sum(g[p][1] == g[f][1] for p, f in pairs())
    assert (right, ties) == (2, 1)
    assert f"**{right} of 4 = {right / 4:.2f}**" in DOC
    assert f"1 of 4 = {ties / 4:.2f}" in DOC
    assert f"would give {(right + ties / 2) / 4:.3f}" in DOC


def test_top1_and_its_chance_level() -> None:
    g = group()
    top = max(g, key=lambda c: g[c][1])
    assert [c for c in g if g[c][1] == g[top][1]] == [top] and g[top][0]
    assert f"{top} (0.9) is the unique top" in DOC
    assert "2 of 4 = 0.5" in DOC


def test_advantages_and_their_gap() -> None:
    g = group()
    names = list(g)
    judge = dict(zip(names, group_advantages([g[c][1] for c in names]), strict=True))
    tests = dict(zip(names, group_advantages([float(g[c][0]) for c in names]), strict=True))
    scores = [g[c][1] for c in names]
    mean = sum(scores) / 4
    std = (sum((x - mean) ** 2 for x in scores) / 4) ** 0.5
    assert f"mean {mean:.3f} and standard deviation {std:.3f}" in DOC
    shown = ", ".join(f"{c} {'+' if a >= 0 else '−'}{abs(a):.2f}" for c, a in judge.items())
    assert shown in DOC

    def gap(adv: dict[str, float]) -> float:
        passing = [adv[c] for c in names if g[c][0]]
        failing = [adv[c] for c in names if not g[c][0]]
        return sum(passing) / len(passing) - sum(failing) / len(failing)

    assert f"is {gap(judge):.2f} for the judge and {gap(tests):.1f} for the tests" in DOC
    assert f"{gap(judge):.2f} / {gap(tests):.1f} = {gap(judge) / gap(tests):.2f}" in DOC
    ordered = all(judge[p] > judge[f] for p, f in pairs())
    assert not ordered and "does **not** count" in DOC


def test_order_consistent_accuracy_and_false_praise() -> None:
    g = group()
    both = sum(g[p][1] > g[f][1] and g[p][2] > g[f][2] for p, f in pairs())
    assert f"**{both} of 4 = {both / 4:.2f}**" in DOC
    failing = [c for c in g if not g[c][0]]
    absolute = sum(g[c][1] >= 0.8 for c in failing)
    within = sum(any(g[c][1] >= g[p][1] for p in g if g[p][0]) for c in failing)
    assert f"**{absolute} of 2**" in DOC and f"**{within} of 2**" in DOC


def test_the_power_table_is_the_power_modules() -> None:
    rows = re.findall(r"^\| (0\.\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", DOC, re.M)
    assert len(rows) == 3
    for sd, *cells in rows:
        needed = [groups_needed(float(sd), d) for d in (0.05, 0.10, 0.15, 0.20)]
        assert [int(c) for c in cells] == needed, sd


def test_advantage_fidelity_is_the_analysis_figure() -> None:
    """The fidelity the doc quotes is what metrics.json reports for this group
    (analysis/fidelity.py): the correlation of the judge's and the tests' advantages, the mean of
    their products, which is also the ratio of the two advantage gaps."""
    g = group()
    names = list(g)
    ids = {"task_id": ["t"] * len(names), "candidate_id": names}
    truth = Truth("execution", pl.DataFrame({**ids, "passed": [g[c][0] for c in names]}), ["t"])
    cand = pl.DataFrame({**ids, "score": [g[c][1] for c in names]})
    value, groups = task_endpoint(cand, truth, "advantage_fidelity")
    fidelity = float(value.sum() / groups.sum())
    assert f"/ 4 = **{fidelity:.2f}**" in DOC
    judge = group_advantages([g[c][1] for c in names])
    tests = group_advantages([float(g[c][0]) for c in names])
    products = [a * t for a, t in zip(judge, tests, strict=True)]
    shown = " ".join(f"{'+' if x >= 0 else '−'} {abs(x):.2f}" for x in products)
    assert f"products average ({shown.removeprefix('+ ')}) / 4" in DOC
    assert abs(sum(products) / 4 - fidelity) < 1e-4


def second_group() -> dict[str, tuple[bool, float]]:
    rows = re.findall(r"^\| ([E-H]) \| (pass|fail) \| ([0-9.]+) \|$", DOC, re.M)
    return {c: (t == "pass", float(s)) for c, t, s in rows}


def test_signal_fidelity_is_the_analysis_figure_over_both_worked_tasks() -> None:
    """The primary over the doc's two tasks, by the analysis's own task_endpoint and by hand
    from training's GRPO advantages (an independent path: c_t = mean(a * b), d_t = 1 for a
    split task, mean(a^2) for one the tests do not split)."""
    g, h = group(), second_group()
    assert len(h) == 4 and not any(p for p, _ in h.values())
    rows = [("t1", c, p, s1) for c, (p, s1, _) in g.items()] + [
        ("t2", c, p, s) for c, (p, s) in h.items()
    ]
    frame = pl.DataFrame(rows, schema=["task_id", "candidate_id", "passed", "score"], orient="row")
    truth = Truth("execution", frame.select("task_id", "candidate_id", "passed"), ["t1", "t2"])
    num, den = task_endpoint(frame.select("task_id", "candidate_id", "score"), truth,
                             "signal_fidelity")  # fmt: skip
    value = float(num.sum() / den.sum())

    def by_hand(scores: list[float], passed: list[bool]) -> tuple[float, float]:
        a = group_advantages(scores)
        b = group_advantages([float(p) for p in passed])
        c = sum(x * y for x, y in zip(a, b, strict=True)) / len(a)
        split = any(passed) and not all(passed)
        return c, 1.0 if split else sum(x * x for x in a) / len(a)

    c1, d1 = by_hand([v[1] for v in g.values()], [v[0] for v in g.values()])
    c2, d2 = by_hand([v[1] for v in h.values()], [v[0] for v in h.values()])
    assert abs((c1 + c2) / (d1 + d2) - value) < 1e-4
    assert f"gives c = {c1:.2f} (the advantage fidelity above) and d = {d1:.0f}" in DOC
    assert f"d = {d2:.2f}. Signal fidelity =" in DOC
    assert f"({c1:.2f} + {c2:.0f}) / ({d1:.0f} + {d2:.2f}) = **{value:.2f}**" in DOC
    assert f"would be {c1:.2f}" in DOC


def test_the_centred_worked_figures() -> None:
    """The doc's centred example from the analysis's own task_endpoint, and by hand: centred
    advantages, c_t = mean(a * b), d_t = mean(b^2) for a split task, mean(a^2) otherwise."""
    g, h = group(), second_group()
    rows = [("t1", c, p, s1) for c, (p, s1, _) in g.items()] + [
        ("t2", c, p, s) for c, (p, s) in h.items()
    ]
    frame = pl.DataFrame(rows, schema=["task_id", "candidate_id", "passed", "score"], orient="row")
    truth = Truth("execution", frame.select("task_id", "candidate_id", "passed"), ["t1", "t2"])
    num, den = task_endpoint(frame.select("task_id", "candidate_id", "score"), truth,
                             "signal_fidelity", "centred")  # fmt: skip
    s1, p1 = [v[1] for v in g.values()], [float(v[0]) for v in g.values()]
    s2 = [v[1] for v in h.values()]
    centre = lambda xs: [x - sum(xs) / len(xs) for x in xs]  # noqa: E731
    a1, b1, a2 = centre(s1), centre(p1), centre(s2)
    c1 = sum(x * y for x, y in zip(a1, b1, strict=True)) / 4
    e1, push2 = sum(y * y for y in b1) / 4, sum(x * x for x in a2) / 4
    assert list(num) == pytest.approx([c1, 0.0]) and list(den) == pytest.approx([e1, push2])
    value = c1 / (e1 + push2)
    assert f"costs mean(a²) = {push2:.4f}" in DOC
    assert f"push of {e1:.2f} in the split group" in DOC
    assert f"{c1:.4f} / ({e1:.2f} + {push2:.4f}) = **{value:.3f}**" in DOC
