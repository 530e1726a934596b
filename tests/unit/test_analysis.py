"""Analysis stage: every statistic against a hand computation or its reference implementation."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import roc_auc_score

from judgelab.analysis.agreement import cluster_interval
from judgelab.analysis.examples import worst_false_praise
from judgelab.analysis.fidelity import candidate_scores, task_parts, truth_metrics
from judgelab.analysis.metrics import compute_metrics
from judgelab.analysis.plot_data import bin_index, score_distribution
from judgelab.analysis.stats import (
    CI_LEVEL,
    CIRule,
    Interval,
    describe,
    evaluator_stats,
    percentile_ci,
    reason_key,
    resample_weights,
    too_few_groups,
)
from judgelab.analysis.truth import execution_truth
from judgelab.config import AnalysisSettings
from judgelab.report.audit import findings, render_html
from judgelab.report.format import fmt_ci
from judgelab.report.outputs import run_analysis
from judgelab.schemas import ScoresSchema, TasksSchema, columns, validate

XSS = "<script>alert('pwned')</script> looks production ready"


def row(
    task: str,
    cand: str,
    evaluator: str,
    protocol: str,
    score: float | None,
    reason: str | None = None,
    repeat: int = 0,
    raw: float | None = None,
    out_of_range: bool = False,
    explanation: str | None = None,
    latency: float = 0.5,
) -> dict[str, Any]:
    return {
        "run_id": "run",
        "task_id": task,
        "candidate_id": cand,
        "evaluator": evaluator,
        "protocol": protocol,
        "judge": None if protocol in ("rule", "execution") else "qwen",
        "repeat": repeat,
        "score": score,
        "raw_score": raw if raw is not None else score,
        "status": "scored" if score is not None else "unscored",
        "out_of_range": out_of_range,
        "reason": reason,
        "explanation": explanation,
        "latency_s": latency,
        "slot": None,
        "permutation": None,
        "outcome": execution_outcome(score, reason) if protocol == "execution" else None,
    }


def execution_outcome(score: float | None, reason: str | None) -> str:
    """The outcome the execution evaluator writes beside such a score and reason."""
    if score is None:
        return "no_tests" if reason == "task has no tests" else "sandbox_error"
    return "passed" if score >= 1.0 else "tests_failed"


# Two tasks with tests (A: 2 pass / 2 fail, B: 1 pass / 2 fail) and one without tests (C).
TRUTH = {"a1": 1.0, "a2": 1.0, "a3": 0.0, "a4": 0.0, "b1": 1.0, "b2": 0.0, "b3": 0.0}
JUDGE = {"a1": 0.9, "a2": 0.5, "a3": 0.9, "a4": 0.2, "b1": 0.6, "b2": 0.8, "b3": 1.0, "c1": 0.7}
TASK_OF = {c: c[0].upper() for c in [*TRUTH, "c1", "c2"]}


def fixture_scores(latency: float = 0.5) -> pl.DataFrame:
    rows = []
    for cand, task in TASK_OF.items():
        if cand in TRUTH:
            rows.append(row(task, cand, "tests", "execution", TRUTH[cand], latency=latency))
        else:
            rows.append(row(task, cand, "tests", "execution", None, reason="task has no tests"))
        if cand in JUDGE:
            explanation = XSS if cand == "a3" else f"ok {cand}"
            rows.append(
                row(
                    task,
                    cand,
                    "judge",
                    "ruler",
                    JUDGE[cand],
                    explanation=explanation,
                    latency=latency,
                )
            )
        else:
            rows.append(row(task, cand, "judge", "ruler", None, reason="parse error: bad json"))
        # an evaluator that never produced a score
        rows.append(
            row(
                task,
                cand,
                "dead",
                "rubric",
                None,
                reason="timeout: 120 s",
                raw=None,
                latency=latency,
            )
        )
    # a judge that went out of range once (raw 2.0, left unscored) and scored twice per candidate
    rows.append(row("A", "a1", "rub", "rubric", 0.4, repeat=0))
    rows.append(row("A", "a1", "rub", "rubric", 0.8, repeat=1))
    rows.append(
        row(
            "A",
            "a3",
            "rub",
            "rubric",
            None,
            repeat=0,
            raw=2.0,
            out_of_range=True,
            reason="out of range: 2.0",
        )
    )
    rows.append(row("A", "a3", "rub", "rubric", 0.1, repeat=1))
    return validate(
        pl.DataFrame(rows, schema=columns(ScoresSchema)), ScoresSchema, "fixture scores"
    )


def fixture_tasks() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "task_id": ["A", "B", "C"],
            "source": ["humaneval", "humaneval", "autorl"],
            "request": ["ra", "rb", "rc"],
            "prompt": ["pa", "pb", "pc"],
            "entry_point": ["f", "g", None],
            "test": ["assert f()", "assert g()", None],
            "canonical_solution": [None, None, None],
        },
        schema=columns(TasksSchema),
    )


def fixture_rollouts() -> pl.DataFrame:
    cands = list(TASK_OF)
    return pl.DataFrame(
        {
            "task_id": [TASK_OF[c] for c in cands],
            "sample_index": [int(c[1]) - 1 for c in cands],
            "candidate_id": cands,
            "policy": ["p"] * len(cands),
            "model_sha256": ["0" * 64] * len(cands),
            "seed": [0] * len(cands),
            "messages_json": ["[]"] * len(cands),
            "completion": [f"def f():\n    return '{c}'  # <b>{c}</b>" for c in cands],
            "finish_reason": ["stop"] * len(cands),
            "completion_tokens": [10] * len(cands),
            "latency_s": [1.0] * len(cands),
            "cache_key": cands,
        }
    )


SETTINGS = AnalysisSettings(praise_threshold=0.8, bins=10, bootstrap=200, seed=7, min_ci_groups=5)
RULE = CIRule.of(SETTINGS)


# ------------------------------------------------------------------------------ stats


def test_describe_matches_numpy() -> None:
    values = np.array([0.9, 0.5, 0.9, 0.2, 0.6, 0.8, 1.0, 0.7])
    d = describe(values)
    assert d["n"] == 8
    assert d["mean"] == pytest.approx(values.mean())
    assert d["median"] == pytest.approx(np.median(values))
    assert d["std"] == pytest.approx(np.std(values, ddof=1))
    assert d["std"] != pytest.approx(np.std(values, ddof=0))
    # by hand: sorted 0.2 0.5 0.6 0.7 0.8 0.9 0.9 1.0; q1 at rank 1.75 -> 0.5 + .75*.1 = 0.575
    assert d["q1"] == pytest.approx(0.575)
    assert d["q3"] == pytest.approx(0.9)
    assert d["iqr"] == pytest.approx(0.325)
    assert (d["min"], d["max"]) == (0.2, 1.0)


def test_describe_empty_and_single() -> None:
    assert describe([])["mean"] is None and describe([])["n"] == 0
    one = describe([0.4])
    assert one["mean"] == 0.4 and one["std"] is None and one["iqr"] == 0.0


def test_evaluator_stats_rates_and_reasons() -> None:
    stats = evaluator_stats(fixture_scores())
    judge = stats["judge"]
    assert judge["n_rows"] == 9 and judge["n_scored"] == 8 and judge["n_unscored"] == 1
    assert judge["unscored_rate"] == pytest.approx(1 / 9)
    assert judge["unscored_by_reason"] == {"parse_error": {"n": 1, "share": 1.0}}
    assert judge["mean"] == pytest.approx(np.mean(list(JUDGE.values())))
    assert judge["std"] == pytest.approx(np.std(list(JUDGE.values()), ddof=1))
    rub = stats["rub"]
    assert rub["n_rows"] == 4 and rub["out_of_range_rate"] == pytest.approx(0.25)
    assert rub["raw_score_max"] == 2.0
    assert rub["unscored_by_reason"] == {"out_of_range": {"n": 1, "share": 1.0}}


def test_all_unscored_evaluator_gives_nulls_and_reason() -> None:
    dead = evaluator_stats(fixture_scores())["dead"]
    assert dead["n_scored"] == 0 and dead["unscored_rate"] == 1.0
    assert all(dead[k] is None for k in ("mean", "median", "std", "q1", "q3", "iqr", "min", "max"))
    assert "unscored" in dead["reason"]
    assert evaluator_stats(fixture_scores().clear()) == {}


def test_reason_key() -> None:
    assert reason_key("Parse error: x: y") == "parse_error"
    assert reason_key("out of range (2.0)") == "out_of_range_2_0"
    assert reason_key(None) == "unspecified" and reason_key("  ") == "unspecified"


# ------------------------------------------------------------------------------ truth


def test_execution_truth_counts_candidates_without_tests() -> None:
    truth = execution_truth(fixture_scores())
    s = truth.summary()
    assert truth.evaluator == "tests" and truth.tasks == ["A", "B"]
    assert (s["n_passing"], s["n_failing"], s["n_candidates_no_truth"]) == (3, 4, 2)


def test_candidate_score_is_mean_of_scored_repeats() -> None:
    cand = candidate_scores(fixture_scores(), "rub")
    got = dict(zip(cand["candidate_id"], cand["score"], strict=True))
    assert got == {"a1": pytest.approx(0.6), "a3": pytest.approx(0.1)}


def test_truth_metrics_by_hand() -> None:
    scores = fixture_scores()
    truth = execution_truth(scores)
    m = truth_metrics(candidate_scores(scores, "judge"), truth, 0.8, None, RULE)
    # A: (a1,a3) tie .5, (a1,a4) 1, (a2,a3) 0, (a2,a4) 1; B: (b1,b2) 0, (b1,b3) 0
    assert m["pairwise_accuracy"] == pytest.approx(2.5 / 6)
    assert (m["n_pairs"], m["n_pair_groups"]) == (6, 2)
    # A: top 0.9 shared by a1 (pass) and a3 (fail) -> 0.5; B: top is b3 (fail) -> 0
    assert m["top1_accuracy"] == pytest.approx(0.25) and m["n_top1_groups"] == 2
    # failing: a3 .9, a4 .2, b2 .8 (>= counts), b3 1.0 -> 3 of 4
    assert m["false_praise_absolute"] == pytest.approx(0.75) and m["n_false_praise"] == 3
    assert m["mean_score_passing"] == pytest.approx(2.0 / 3)
    assert m["mean_score_failing"] == pytest.approx(0.725)
    assert m["score_gap"] == pytest.approx(2.0 / 3 - 0.725)
    y = [TRUTH[c] for c in TRUTH]
    s = [JUDGE[c] for c in TRUTH]
    assert m["roc_auc"] == pytest.approx(roc_auc_score(y, s))
    assert m["roc_auc"] == pytest.approx(4.5 / 12)  # by hand, ties count half
    # c1 is scored by the judge but has no tests
    assert m["n_candidates_no_truth"] == 1 and m["n_candidates"] == 7
    assert m["n_bootstrap"] == 0 and m["roc_auc_ci_low"] is None and "ci" in m["reasons"]


def test_false_praise_threshold_is_inclusive() -> None:
    scores = fixture_scores()
    truth = execution_truth(scores)
    cand = candidate_scores(scores, "judge")
    at = {t: truth_metrics(cand, truth, t, None, RULE) for t in (0.81, 1.0)}
    assert at[0.81]["false_praise_absolute"] == pytest.approx(0.5)
    assert at[1.0]["false_praise_absolute"] == pytest.approx(0.25)


def test_unscored_and_missing_evaluators_do_not_crash() -> None:
    scores = fixture_scores()
    truth = execution_truth(scores)
    w = resample_weights(len(truth.tasks), 50, 0)
    for name in ("dead", "nobody"):
        m = truth_metrics(candidate_scores(scores, name), truth, 0.8, w, RULE)
        assert m["n_candidates"] == 0
        assert m["roc_auc"] is None and m["pairwise_accuracy"] is None
        assert m["reasons"]["roc_auc"] and m["reasons"]["false_praise_absolute"]
    # no execution evaluator at all
    no_exec = scores.filter(pl.col("protocol") != "execution")
    t2 = execution_truth(no_exec)
    m = truth_metrics(candidate_scores(no_exec, "judge"), t2, 0.8, resample_weights(0, 10, 0), RULE)
    assert t2.evaluator is None and m["false_praise_absolute"] is None
    assert "execution" in m["reasons"]["false_praise_absolute"]


def test_roc_auc_null_with_one_class() -> None:
    scores = fixture_scores().filter(pl.col("candidate_id").is_in(["a1", "a2", "b1"]))
    truth = execution_truth(scores)
    m = truth_metrics(candidate_scores(scores, "judge"), truth, 0.8, None, RULE)
    assert m["roc_auc"] is None and "only one class" in m["reasons"]["roc_auc"]
    assert m["pairwise_accuracy"] is None and m["false_praise_absolute"] is None
    assert m["mean_score_passing"] == pytest.approx((0.9 + 0.5 + 0.6) / 3)


def random_scores(n_tasks: int = 30, k: int = 4, seed: int = 1) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        for c in range(k):
            cid = f"t{t}c{c}"
            passed = float(rng.random() < 0.4)
            rows.append(row(f"t{t}", cid, "tests", "execution", passed))
            judged = float(np.clip(0.5 + 0.25 * passed + rng.normal(0, 0.25), 0, 1))
            rows.append(row(f"t{t}", cid, "judge", "ruler", round(judged, 1)))
    return pl.DataFrame(rows, schema=columns(ScoresSchema))


def test_weighted_figures_equal_duplicated_tasks() -> None:
    """A bootstrap weight vector must give what physically duplicating the tasks gives."""
    scores = random_scores()
    truth = execution_truth(scores)
    cand = candidate_scores(scores, "judge").join(truth.table, on=["task_id", "candidate_id"])
    index = {t: i for i, t in enumerate(truth.tasks)}
    task_idx = np.array([index[t] for t in cand["task_id"]])
    score, passed = cand["score"].to_numpy(), cand["passed"].to_numpy().astype(bool)
    parts = task_parts(task_idx, score, passed, len(truth.tasks), 0.8)
    w = resample_weights(len(truth.tasks), 3, 11)
    for b in range(3):
        figs = {k: v[0] for k, v in parts.figures(w[b : b + 1]).items()}
        rw = w[b, task_idx]
        assert figs["roc_auc"] == pytest.approx(roc_auc_score(passed, score, sample_weight=rw))
        # physically duplicate each task w times (with fresh task ids) and recompute the point
        dup_rows = []
        for t, name in enumerate(truth.tasks):
            for copy in range(int(w[b, t])):
                sub = scores.filter(pl.col("task_id") == name).with_columns(
                    pl.lit(f"{name}#{copy}").alias("task_id"),
                    (pl.col("candidate_id") + f"#{copy}").alias("candidate_id"),
                )
                dup_rows.append(sub)
        dup = pl.concat(dup_rows)
        dtruth = execution_truth(dup)
        point = truth_metrics(candidate_scores(dup, "judge"), dtruth, 0.8, None, RULE)
        for key in (
            "pairwise_accuracy",
            "top1_accuracy",
            "false_praise_absolute",
            "score_gap",
            "roc_auc",
        ):
            assert figs[key] == pytest.approx(point[key]), key


def test_bootstrap_deterministic_and_ci_contains_point() -> None:
    scores = random_scores()
    truth = execution_truth(scores)
    cand = candidate_scores(scores, "judge")
    w1 = resample_weights(len(truth.tasks), 500, 3)
    m1 = truth_metrics(cand, truth, 0.8, w1, RULE)
    m2 = truth_metrics(cand, truth, 0.8, resample_weights(len(truth.tasks), 500, 3), RULE)
    m3 = truth_metrics(cand, truth, 0.8, resample_weights(len(truth.tasks), 500, 4), RULE)
    assert m1 == m2
    # the studentized bootstrap's ends move with the resamples; Wilson's and the t interval's
    # come from the jackknife and do not
    assert m1["advantage_fidelity_ci_low"] != m3["advantage_fidelity_ci_low"]
    assert m1["pairwise_accuracy_ci_low"] == m3["pairwise_accuracy_ci_low"]
    for key in (
        "roc_auc",
        "pairwise_accuracy",
        "top1_accuracy",
        "false_praise_absolute",
        "score_gap",
        "advantage_fidelity",
        "top1_over_chance",
        "mean_score_passing",
    ):
        low, high = m1[f"{key}_ci_low"], m1[f"{key}_ci_high"]
        assert low is not None and high is not None
        assert low <= m1[key] <= high, key
        assert low < high, key
    # each resample draws n_tasks tasks
    assert (w1.sum(axis=1) == len(truth.tasks)).all()


# ------------------------------------------------------------------------------ plots/report


def test_bins_and_distribution() -> None:
    assert bin_index(np.array([0.0, 0.0999, 0.1, 0.3, 0.7, 0.99, 1.0]), 10).tolist() == [
        0,
        0,
        1,
        3,
        7,
        9,
        9,
    ]
    scores = fixture_scores()
    dist = score_distribution(scores, execution_truth(scores), 10)
    judge = dist.filter(pl.col("evaluator") == "judge")
    assert judge["count"].sum() == 8
    fail_counts = judge.filter(pl.col("truth") == "fail").sort("bin")["count"].to_list()
    assert fail_counts == [0, 0, 1, 0, 0, 0, 0, 0, 1, 2]  # 0.2, 0.8, 0.9, 1.0
    assert judge.filter(pl.col("truth") == "unknown")["count"].sum() == 1  # c1


def test_worst_false_praise_orders_and_joins_code() -> None:
    scores = fixture_scores()
    ex = worst_false_praise(scores, fixture_rollouts(), execution_truth(scores), 3)
    assert [(e["candidate_id"], e["score"]) for e in ex] == [("b3", 1.0), ("a3", 0.9), ("b2", 0.8)]
    assert "return 'b3'" in ex[0]["code"] and ex[1]["explanation"] == XSS


def test_worst_false_praise_is_praise_only_and_says_why_the_tests_failed() -> None:
    """Only scores at or above the threshold are false praise (a 0.2 or a 0.5 is not), each
    with the execution verdict's reason."""
    scores = fixture_scores().with_columns(
        pl.when(pl.col("evaluator") == "tests")
        .then(pl.format("AssertionError in {}", pl.col("candidate_id")))
        .otherwise(pl.col("reason"))
        .alias("reason")
    )
    truth = execution_truth(scores)
    ex = worst_false_praise(scores, fixture_rollouts(), truth, 10, threshold=0.85)
    assert [(e["candidate_id"], e["score"]) for e in ex] == [("b3", 1.0), ("a3", 0.9)]
    assert ex[0]["test_reason"] == "AssertionError in b3"
    failing_scores = worst_false_praise(scores, fixture_rollouts(), truth, 10, threshold=0.0)
    assert min(e["score"] for e in failing_scores) < 0.8  # the fixture has low scores too
    assert worst_false_praise(scores, fixture_rollouts(), truth, 10, threshold=1.01) == []


def test_run_analysis_writes_everything(tmp_path: Path) -> None:
    out = tmp_path / "a"
    metrics = run_analysis(fixture_tasks(), fixture_rollouts(), fixture_scores(), SETTINGS, out)
    for rel in (
        "metrics.json",
        "report.md",
        "report.html",
        "plots/score_distribution.csv",
        "plots/judge_vs_truth.csv",
        "plots/png/judge_comparison.png",
        "plots/png/hist_judge.png",
    ):
        assert (out / rel).is_file(), rel
    assert json.loads((out / "metrics.json").read_text()) == metrics
    assert metrics["n_tasks"] == 3 and metrics["n_candidates"] == 9
    assert set(metrics["evaluators"]) == {"dead", "judge", "rub", "tests"}
    t = metrics["evaluators"]["judge"]["truth"]
    assert t["pairwise_accuracy"] == pytest.approx(2.5 / 6, abs=1e-6)
    # two tasks: the value and its n, no CI (an interval from two groups would mislead)
    assert t["pairwise_accuracy_ci_low"] is None and t["pairwise_accuracy_n_groups"] == 2
    assert metrics["evaluators"]["dead"]["truth"]["roc_auc"] is None
    vs = pl.read_csv(out / "plots/judge_vs_truth.csv")
    assert vs.columns == ["evaluator", "task_id", "candidate_id", "score", "passed"]
    assert vs.filter(pl.col("evaluator") == "judge").height == 7
    comparison = pl.read_csv(out / "plots/judge_comparison.csv")
    assert set(comparison["evaluator"]) == {"dead", "judge", "rub"}  # truth itself left out


def test_metrics_json_identical_across_runs_and_timings(tmp_path: Path) -> None:
    run_analysis(fixture_tasks(), fixture_rollouts(), fixture_scores(0.5), SETTINGS, tmp_path / "1")
    run_analysis(fixture_tasks(), fixture_rollouts(), fixture_scores(9.0), SETTINGS, tmp_path / "2")
    first = (tmp_path / "1" / "metrics.json").read_bytes()
    assert first == (tmp_path / "2" / "metrics.json").read_bytes()
    assert b"latency" not in first and b"NaN" not in first
    # the report does carry latency, and differs
    assert "Latency" in (tmp_path / "2" / "report.md").read_text()
    other = AnalysisSettings(praise_threshold=0.8, bins=10, bootstrap=200, seed=8)
    run_analysis(fixture_tasks(), fixture_rollouts(), fixture_scores(), other, tmp_path / "3")
    assert first != (tmp_path / "3" / "metrics.json").read_bytes()


def test_report_html_has_table_and_escapes_model_text(tmp_path: Path) -> None:
    run_analysis(fixture_tasks(), fixture_rollouts(), fixture_scores(), SETTINGS, tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert '<table id="headline">' in page and "<td>judge</td>" in page
    assert "false praise" in page and "75.0%" in page
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in page
    assert "&lt;b&gt;a3&lt;/b&gt;" in page  # code excerpts are escaped too
    assert page.count("data:image/png;base64,") == 6  # decision forest + comparison + 4 histograms
    assert page.index("<h2>Decision</h2>") < page.index("<h2>The audit</h2>")
    assert "http://" not in page and "https://" not in page
    md = (tmp_path / "report.md").read_text()
    assert "| judge | ruler | 8/9 |" in md
    assert "praises failing code (absolute scale): 75.0% (n = 2 groups: too few" in md


def test_render_html_escapes_evaluator_names() -> None:
    metrics = compute_metrics(
        fixture_tasks(),
        fixture_rollouts(),
        fixture_scores().with_columns(pl.col("evaluator").replace("judge", "<img src=x>")),
        SETTINGS,
    )
    page = render_html(metrics, {}, [], {})
    assert "<img src=x>" not in page and "&lt;img src=x&gt;" in page


def test_run_analysis_with_empty_scores(tmp_path: Path) -> None:
    empty = fixture_scores().clear()
    metrics = run_analysis(fixture_tasks(), fixture_rollouts(), empty, SETTINGS, tmp_path)
    assert metrics["evaluators"] == {} and metrics["execution_truth"]["evaluator"] is None
    assert (tmp_path / "report.html").is_file()


# ------------------------------------------------------------------------- CIs, scales


TOO_FEW = "n = 2 groups: too few for a CI (minimum 5)"


def test_no_ci_from_fewer_than_min_ci_groups_in_metrics_and_report(tmp_path: Path) -> None:
    """17.1: two tasks give three distinct resamples: the value and its n, never an interval."""
    metrics = run_analysis(
        fixture_tasks(), fixture_rollouts(), fixture_scores(), SETTINGS, tmp_path
    )
    t = metrics["evaluators"]["judge"]["truth"]
    for key in ("pairwise_accuracy", "top1_accuracy", "false_praise_absolute", "roc_auc"):
        assert t[key] is not None, key
        assert (t[f"{key}_ci_low"], t[f"{key}_ci_high"]) == (None, None), key
        assert t[f"{key}_ci_reason"] == TOO_FEW and t[f"{key}_n_groups"] == 2, key
        assert t[f"{key}_undefined_resamples"] is None, key
    md = (tmp_path / "report.md").read_text()
    # tables: the value and n compactly, the rule once in a footnote under each table
    headline = md.split("## Headline", 1)[1].split("## ", 1)[0]
    assert "| 0.417 (n = 2)† |" in headline and TOO_FEW not in headline
    assert headline.count("† Fewer task groups than the minimum (5) behind the figure") == 1
    assert f"0.417 ({TOO_FEW})" in md  # pairwise accuracy 2.5/6, in the findings' prose
    assert f"75.0% ({TOO_FEW})" in md  # false praise
    assert "0.417 [" not in md and "75.0% [" not in md
    # the same data with the minimum lowered to 2 gets its (degenerate) interval back
    low = SETTINGS.model_copy(update={"min_ci_groups": 2})
    t2 = compute_metrics(fixture_tasks(), fixture_rollouts(), fixture_scores(), low)
    t2 = t2["evaluators"]["judge"]["truth"]
    assert t2["pairwise_accuracy_ci_low"] is not None and t2["pairwise_accuracy_ci_reason"] is None


def test_min_ci_groups_setting_is_validated() -> None:
    assert AnalysisSettings().min_ci_groups == 15  # docs/SELFTEST.md
    with pytest.raises(ValueError, match="min_ci_groups"):
        AnalysisSettings(min_ci_groups=1)


def test_one_ci_rule_is_built_from_the_settings() -> None:
    """The bootstrap, seed and minimum of groups travel as one object; the probes keep the
    minimum and level with their own resamples; a rule below two groups cannot exist."""
    rule = CIRule.of(AnalysisSettings(bootstrap=300, seed=4, min_ci_groups=7))
    assert (rule.min_ci_groups, rule.n_boot, rule.seed, rule.level) == (7, 300, 4, CI_LEVEL)
    probes = rule.resampled(50, 9)
    assert (probes.min_ci_groups, probes.n_boot, probes.seed, probes.level) == (7, 50, 9, CI_LEVEL)
    with pytest.raises(ValueError, match="at least 2 groups"):
        CIRule(1, 100, 0, CI_LEVEL)
    with pytest.raises(ValueError, match="n_boot"):
        CIRule(5, -1, 0, CI_LEVEL)


def test_min_ci_groups_counts_the_tasks_that_contribute_to_each_figure() -> None:
    """Thirty tasks, but only three with both a passing and a failing candidate: the within-task
    figures come from three groups and get no CI; false praise (every task fails) gets one."""
    rows = []
    for t in range(30):
        for c in range(3):
            passed = 1.0 if (t < 3 and c == 0) else 0.0
            cid = f"t{t}c{c}"
            rows.append(row(f"t{t}", cid, "tests", "execution", passed))
            rows.append(row(f"t{t}", cid, "judge", "ruler", round(0.1 * ((t + c) % 10), 1)))
    scores = pl.DataFrame(rows, schema=columns(ScoresSchema))
    truth = execution_truth(scores)
    w = resample_weights(len(truth.tasks), 300, 0)
    m = truth_metrics(candidate_scores(scores, "judge"), truth, 0.8, w, RULE)
    assert m["pairwise_accuracy_n_groups"] == 3 and m["top1_accuracy_n_groups"] == 3
    assert m["pairwise_accuracy_ci_low"] is None
    assert m["pairwise_accuracy_ci_reason"] == "n = 3 groups: too few for a CI (minimum 5)"
    assert m["false_praise_absolute_n_groups"] == 30
    assert m["false_praise_absolute_ci_low"] is not None
    assert m["mean_score_passing_n_groups"] == 3 and m["mean_score_passing_ci_low"] is None


def test_undefined_resamples_are_counted_and_reported() -> None:
    """17.2: a resample without a mixed task leaves advantage fidelity (a studentized-bootstrap
    figure) undefined; the count is the number of weight rows with no weight on a mixed task
    (computed here independently). Wilson's shares use no resample: none is undefined."""
    rows = []
    for t in range(10):
        for c in range(3):
            passed = 1.0 if t >= 2 or c == 0 else 0.0  # t0, t1 mixed; the others all pass
            cid = f"t{t}c{c}"
            rows.append(row(f"t{t}", cid, "tests", "execution", passed))
            # t1's passing c0 on top: the two mixed tasks differ (a spread to draw a CI from)
            score = 0.9 if (t, c) == (1, 0) else round(0.3 * c + 0.05 * t, 2)
            rows.append(row(f"t{t}", cid, "judge", "ruler", score))
    scores = pl.DataFrame(rows, schema=columns(ScoresSchema))
    truth = execution_truth(scores)
    w = resample_weights(len(truth.tasks), 1000, 1)
    m = truth_metrics(candidate_scores(scores, "judge"), truth, 0.8, w, CIRule(2, 200, 7, CI_LEVEL))
    mixed = [truth.tasks.index(f"t{t}") for t in range(2)]
    assert m["pairwise_accuracy_n_groups"] == 2
    expected = int((w[:, mixed].sum(axis=1) == 0).sum())
    assert 60 < expected < 160  # (8/10)^10 = 0.107 of the resamples
    assert m["advantage_fidelity_undefined_resamples"] == expected
    assert m["top1_over_chance_undefined_resamples"] == expected
    assert m["pairwise_accuracy_undefined_resamples"] == 0
    assert m["mean_score_passing_undefined_resamples"] == 0
    text = fmt_ci(m, "advantage_fidelity")
    assert text.endswith(f"({expected} of 1000 resamples undefined)") and " [" in text


def test_percentile_ci_by_hand_and_the_rule_text() -> None:
    ci = percentile_ci([np.nan, 1.0, 2.0, None, 3.0, 4.0, np.inf], 7, RULE)
    # linear interpolation over the 4 defined draws: 1 + 0.025 * 3 and 4 - 0.025 * 3
    assert (ci.low, ci.high) == (pytest.approx(1.075), pytest.approx(3.925))
    assert ci.undefined_resamples == 3 and ci.reason is None and ci.n_groups == 7
    assert too_few_groups(4, 5) == "n = 4 groups: too few for a CI (minimum 5)"
    assert too_few_groups(1, 5) == "n = 1 group: too few for a CI (minimum 5)"
    assert too_few_groups(5, 5) is None
    none = percentile_ci([0.1, 0.2], 4, RULE)
    assert not none.valid and none.undefined_resamples is None and "n = 4" in str(none.reason)
    assert (
        percentile_ci([np.nan, np.nan], 9, RULE).reason == "undefined in every one of 2 resamples"
    )
    assert not Interval(None, None, "x", 2).excludes(0.5)
    assert Interval(0.6, 0.9, None, 9).excludes(0.5)


def test_cluster_interval_matches_scipy_bootstrap_percentile() -> None:
    """An independent reference: scipy's percentile bootstrap of a mean over 60 groups."""
    from scipy.stats import bootstrap

    values = np.random.default_rng(4).beta(2, 3, size=60)
    ours = cluster_interval(
        values.size, lambda idx: float(values[idx].mean()), CIRule(5, 4000, 0, CI_LEVEL)
    )
    ref = bootstrap(
        (values,), np.mean, n_resamples=4000, method="percentile", random_state=1
    ).confidence_interval
    assert ours.low == pytest.approx(ref.low, abs=0.01)
    assert ours.high == pytest.approx(ref.high, abs=0.01)


def test_prose_claims_a_ranking_only_when_a_ci_excludes_chance() -> None:
    """17.3: 'ranks passing code above failing code' needs a CI above 0.5."""
    base = {"protocol": "rubric", "n_scored": 9, "n_rows": 9, "mean": 0.5, "median": 0.5}
    truth = {"pairwise_accuracy": 0.9, "n_pairs": 12, "n_pair_groups": 2, "reasons": {}}

    def lines(**ci: Any) -> str:
        return " ".join(findings("j", {**base, "truth": {**truth, **ci}}))

    no_ci = lines(pairwise_accuracy_ci_reason=TOO_FEW, pairwise_accuracy_n_groups=2)
    assert "ranks passing code above" not in no_ci and "ABOVE" not in no_ci
    assert f"no ranking claim without a CI: pairwise accuracy 0.900 ({TOO_FEW})" in no_ci
    above = lines(pairwise_accuracy_ci_low=0.6, pairwise_accuracy_ci_high=0.95)
    assert "ranks passing code above failing code: pairwise accuracy 0.900 [0.600" in above
    chance = lines(pairwise_accuracy_ci_low=0.45, pairwise_accuracy_ci_high=0.95)
    assert "cannot be told apart from chance" in chance
    below = lines(pairwise_accuracy=0.2, pairwise_accuracy_ci_low=0.1,
                  pairwise_accuracy_ci_high=0.4)  # fmt: skip
    assert "ranks failing code ABOVE passing code" in below


def _hand_z(cand: pl.DataFrame) -> dict[str, float]:
    out = {}
    for task in cand["task_id"].unique().to_list():
        part = cand.filter((pl.col("task_id") == task) & pl.col("score").is_not_null())
        s = part["score"].to_numpy()
        sd = s.std()  # population std, as GRPO
        z = (s - s.mean()) / sd if sd > 0 else np.zeros_like(s)
        z = np.round(z, 9)  # b2 sits at its task's mean: z is 0, not float noise above it
        out.update(zip(part["candidate_id"].to_list(), z.tolist(), strict=True))
    return out


def test_group_judge_within_task_figures_and_standardised_scores() -> None:
    """17.4: tied pairs by hand; standardised ROC-AUC against sklearn on hand z-scores; a
    per-task offset moves pooled ROC-AUC but no within-task or standardised figure."""
    scores = fixture_scores()
    truth = execution_truth(scores)
    cand = candidate_scores(scores, "judge")
    m = truth_metrics(cand, truth, 0.8, None, RULE)
    # within-task pairs: A (a1,a3) tie, (a1,a4), (a2,a3), (a2,a4); B (b1,b2), (b1,b3)
    assert m["tied_pair_share"] == pytest.approx(1 / 6) and m["n_tied_pairs"] == 1
    z = _hand_z(cand)
    ids = list(TRUTH)
    y = [TRUTH[c] for c in ids]
    assert m["roc_auc_standardised"] == pytest.approx(roc_auc_score(y, [z[c] for c in ids]))
    fails = [c for c in ids if TRUTH[c] == 0.0]
    assert m["false_praise_standardised"] == pytest.approx(np.mean([z[c] > 0 for c in fails]))
    # a3 and b3 are above their tasks' means; b2 (0.8 of 0.6, 0.8, 1.0) is at it: GRPO's
    # advantage 0 does not push it up, so it is no false praise
    assert z["b2"] == 0.0 and m["false_praise_standardised"] == pytest.approx(0.5)
    shifted = cand.with_columns(
        pl.when(pl.col("task_id") == "B").then(pl.col("score") - 0.5).otherwise(pl.col("score"))
    )
    s = truth_metrics(shifted, truth, 0.8, None, RULE)
    assert s["roc_auc"] != pytest.approx(m["roc_auc"])  # the absolute scale moved
    for key in ("pairwise_accuracy", "top1_accuracy", "tied_pair_share", "roc_auc_standardised",
                "false_praise_standardised"):  # fmt: skip
        assert s[key] == pytest.approx(m[key]), key


def test_report_headlines_group_judges_within_task(tmp_path: Path) -> None:
    metrics = run_analysis(
        fixture_tasks(), fixture_rollouts(), fixture_scores(), SETTINGS, tmp_path
    )
    md = (tmp_path / "report.md").read_text()
    header = md.split("## Headline", 1)[1].split("\n")[2]
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[3:8] == [
        "signal fidelity (the default primary)",  # the primary is in the headline table
        "strict pairwise acc. (ties wrong)",
        "tie rate",
        "top-1 acc. − chance",
        "advantage fidelity",
    ]
    assert "pairwise acc. (ties ½, secondary)" in columns
    assert "ROC-AUC (pooled, absolute scale)" in columns
    assert "false praise (score ≥ threshold, absolute scale)" in columns
    judge = findings("judge", metrics["evaluators"]["judge"])
    assert judge[0].startswith("on mixed tasks, where GRPO learns: strict pairwise accuracy")
    assert judge[1].startswith("no ranking claim") and judge[2].startswith("within tasks")
    assert any("(absolute scale)" in line and "praises failing" in line for line in judge)
    rubric = findings("rub", metrics["evaluators"]["rub"])
    assert not any("absolute scale" in line for line in rubric)  # pointwise: absolute is fine


def test_scores_schema_rejects_a_candidate_id_under_two_tasks() -> None:
    """Truth is joined to judge scores on candidate_id alone, so the schema makes that join
    safe: one candidate_id, one task."""
    from judgelab.errors import TableError

    rows = [row("A", "x1", "tests", "execution", 1.0), row("B", "x1", "tests", "execution", 0.0)]
    with pytest.raises(TableError, match="candidate_id under more than one task_id"):
        validate(pl.DataFrame(rows, schema=columns(ScoresSchema)), ScoresSchema, "scores")
    validate(fixture_scores(), ScoresSchema, "scores")  # distinct ids pass


def test_zero_advantage_rate_and_within_group_spread_by_hand() -> None:
    """Groups (task, repeat) with >= 2 scored candidates: A r0 all 0.5 (zero advantage),
    B r0 0.1 / 0.9 (sample std 0.5657), A r1 one scored candidate (not a group), and an
    unscored row that never counts."""
    from judgelab.analysis.stats import stats_for_evaluator
    from judgelab.report.audit import zero_advantage_cell

    rows = pl.DataFrame(
        [
            row("A", "a1", "j", "ruler", 0.5), row("A", "a2", "j", "ruler", 0.5),
            row("A", "a3", "j", "ruler", 0.5), row("B", "b1", "j", "ruler", 0.1),
            row("B", "b2", "j", "ruler", 0.9), row("B", "b3", "j", "ruler", None, reason="x"),
            row("A", "a1", "j", "ruler", 0.7, repeat=1),
        ]
    )  # fmt: skip
    ev = stats_for_evaluator(rows)
    assert ev["n_signal_groups"] == 2 and ev["zero_advantage_rate"] == 0.5
    assert ev["within_group_std"] == pytest.approx((0.0 + statistics.stdev([0.1, 0.9])) / 2)
    assert zero_advantage_cell(ev) == "50.0% (1 of 2)"
    assert any("no learning signal in 1 of 2 groups" in f for f in findings("j", ev))
    flat = stats_for_evaluator(rows.filter(pl.col("task_id") == "A"))
    assert flat["zero_advantage_rate"] == 1.0
    assert any("in all 1 group every candidate got the same score" in f
               for f in findings("j", flat))  # fmt: skip
