"""The rulebook (analysis/rulebook.py) on a synthetic audit whose per-task figures are
computed here again with numpy and whose tests are scipy's: each rule's p-value, its Holm
correction over the judges, and which judges each rule rejects; then the decision and its
words on the same audit (a format gate is never the reward alone)."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest
from scipy import stats as st

from judgelab.analysis.inference import holm
from judgelab.analysis.metrics import compute_metrics
from judgelab.config import AnalysisSettings
from judgelab.report.decision import decision_sentences
from judgelab.schemas import ScoresSchema, columns
from tests.unit.test_analysis import row

N_TASKS = 40


def _verdicts(t: int) -> list[tuple[float, str]]:
    """Task t's four candidates: a pass, a parseable failure, one that does not parse, and a
    fourth that passes in even tasks."""
    fourth = (1.0, "passed") if t % 2 == 0 else (0.0, "tests_failed")
    return [(1.0, "passed"), (0.0, "tests_failed"), (0.0, "not_parsed"), fourth]


def _judges(t: int, rng: np.random.Generator) -> dict[str, list[float | None]]:
    verdicts = _verdicts(t)
    passed = [v for v, _ in verdicts]
    good = [round(0.3 + 0.5 * p + 0.2 * float(rng.random()), 3) for p in passed]
    return {
        "good": good,
        # 1 for code that parses, 0 for code that does not: nothing to say about parseable code
        "syntax": [0.0 if o == "not_parsed" else 1.0 for _, o in verdicts],
        "inverse": [round(1.0 - p + 0.1 * float(rng.random()), 3) for p in passed],
        # one score for the whole group in 3 tasks of 4
        "flat": [0.5] * 4 if t % 4 else good,
        # half its candidates unscored
        "gaps": [s if i % 2 == 0 else None for i, s in enumerate(good)],
    }


def audit() -> pl.DataFrame:
    rng = np.random.default_rng(11)
    rows: list[dict[str, Any]] = []
    for t in range(N_TASKS):
        task = f"t{t:02d}"
        judges = _judges(t, rng)
        for c, (passed, outcome) in enumerate(_verdicts(t)):
            cid = f"{task}c{c}"
            rows.append(row(task, cid, "tests", "execution", passed) | {"outcome": outcome})
            for name, scores in judges.items():
                why = "no reply" if scores[c] is None else None
                rows.append(row(task, cid, name, "rubric", scores[c], reason=why))
    return pl.DataFrame(rows, schema=columns(ScoresSchema))


def _advantages(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / x.std() if x.std() > 1e-12 else np.zeros_like(x)


def _per_task_fidelity(scores: pl.DataFrame, name: str, parseable: bool = False) -> np.ndarray:
    """Each (split) task's mean a_judge * a_tests, by hand; unscored: advantage 0."""
    out = []
    for t in range(N_TASKS):
        task = f"t{t:02d}"
        tests = scores.filter((pl.col("task_id") == task) & (pl.col("evaluator") == "tests"))
        judge = scores.filter((pl.col("task_id") == task) & (pl.col("evaluator") == name))
        keep = [o != "not_parsed" or not parseable for o in tests.get_column("outcome")]
        y = tests.get_column("score").to_numpy()[keep]
        s = judge.get_column("score").to_numpy().astype(float)[keep]
        ok = np.isfinite(s)
        a = np.zeros_like(s)
        a[ok] = _advantages(s[ok])
        out.append(float(np.mean(a * _advantages(y))))
    return np.array(out)


@pytest.fixture(scope="module")
def metrics() -> dict[str, Any]:
    scores = audit()
    tasks = pl.DataFrame({"task_id": [f"t{t:02d}" for t in range(N_TASKS)]})
    return compute_metrics(tasks, scores.select("candidate_id").unique(), scores,
                           AnalysisSettings(bootstrap=200)) | {"_scores": scores}  # fmt: skip


def test_rule_1_is_a_one_sided_t_test_of_each_tasks_signal(metrics: dict[str, Any]) -> None:
    """Every task is split (a pass and a fail), so each weighs 1 and signal fidelity's test
    is scipy's one-sample t-test of the per-task correlations, computed here by hand."""
    book = metrics["rulebook"]
    for name in ("good", "syntax", "inverse"):
        c = _per_task_fidelity(metrics["_scores"], name)
        got = book["judges"][name]["chance"]
        assert got["value"] == pytest.approx(c.mean(), abs=1e-6)
        expected = st.ttest_1samp(c, 0.0, alternative="greater").pvalue
        assert got["p"] == pytest.approx(expected, abs=1e-6)
    family = book["rules"]["chance"]["family"]
    raw = [book["judges"][n]["chance"]["p"] for n in family]
    adjusted = [book["judges"][n]["chance"]["p_holm"] for n in family]
    assert adjusted == pytest.approx(holm(raw), abs=1e-6)
    assert book["rules"]["chance"]["n_tests"] == 5 and book["level"] == 0.025
    assert not book["judges"]["good"]["chance"]["rejects"]
    assert book["judges"]["inverse"]["chance"]["rejects"]


def test_rules_2_to_4_reject_only_where_their_test_shows_it(metrics: dict[str, Any]) -> None:
    judges = metrics["rulebook"]["judges"]
    rejects = {n: sorted(r for r, t in rules.items() if t.get("rejects"))
               for n, rules in judges.items()}  # fmt: skip
    assert rejects["good"] == []
    assert "inverted" in rejects["inverse"] and "flat" in rejects["flat"]
    assert "unscored" in rejects["gaps"] and "flat" not in rejects["good"]
    flat = judges["flat"]["flat"]  # 30 of 40 mixed tasks flat: exact binomial against 0.5
    assert (flat["k"], flat["n"]) == (30, 40)
    assert flat["p"] == pytest.approx(st.binomtest(30, 40, 0.5, "greater").pvalue, abs=1e-6)
    gaps = judges["gaps"]["unscored"]  # 2 of 4 rows per task: no spread, shown above 10 %
    assert gaps["value"] == pytest.approx(0.5) and gaps["p"] == 0.0


def test_rule_7_and_the_format_gate(metrics: dict[str, Any]) -> None:
    """syntax's signal is all in the code that does not parse: exactly 0 on parseable code,
    so it is a format gate; good keeps its signal there (by hand, scipy's test)."""
    judges = metrics["rulebook"]["judges"]
    assert judges["syntax"]["parseable"]["value"] == pytest.approx(0.0, abs=1e-12)
    assert judges["syntax"]["parseable"]["rejects"]
    c = _per_task_fidelity(metrics["_scores"], "good", parseable=True)
    assert judges["good"]["parseable"]["p"] == pytest.approx(
        st.ttest_1samp(c, 0.0, alternative="greater").pvalue, abs=1e-6
    )
    d = metrics["decision"]
    assert list(d["format_gates"]) == ["syntax"] and "syntax" not in d["rejected"]
    assert (d["verdict"], d["judge"]) == ("judge", "good")
    words = " ".join(decision_sentences(metrics))
    assert "syntax gives no signal on code that parses" in words
    assert "Use it as a format gate (no reward for code that does not parse) beside good" in words
    assert "never as the reward alone" in words
