"""Truth that says what kind it is: the execution evaluator's
verdicts tell "did not parse / no code" from "tests failed" from "sandbox error" in an outcome
of their own (the scores table's `outcome` column, which truth reads), and the truth figures
are taken on parseable code only as well, in metrics.json and the report, beside the figures
on all code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from judgelab.analysis.metrics import compute_metrics
from judgelab.analysis.truth import execution_truth
from judgelab.config import AnalysisSettings
from judgelab.config.evaluators import ExecutionSettings
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.report.outputs import run_analysis
from judgelab.sandbox import Limits, SandboxResult
from judgelab.sandbox.verify import reading
from judgelab.schemas import RolloutsSchema, ScoresSchema, TasksSchema, columns, validate
from judgelab.tasks import testing
from judgelab.tasks.testing import Judged
from judgelab.verdicts import OUTCOMES, Candidate, Task

ADD = Task(
    task_id="add",
    source="files",
    prompt='def add(a, b):\n    """a + b"""\n',
    entry_point="add",
    test="def check(f):\n    assert f(1, 2) == 3\n    assert f(-1, 1) == 0\n",
)
GOOD = "def add(a, b):\n    return a + b"
# Each answer and the outcome its verdict must read back as, through the real sandbox.
ANSWERS = {
    "passes": (f"<code>\n{GOOD}\n</code>", "passed"),
    "wrong": ("<code>\ndef add(a, b):\n    return a - b\n</code>", "tests_failed"),
    "no code": ("I would add the numbers.", "no_code"),
    # the default run's headline case: a <code> tag never closed took in a Markdown fence
    "unclosed tag": (f"<code>\n```python\n{GOOD}\n```", "not_parsed"),
    "bad indent": ("<code>\ndef add(a, b):\nreturn a + b\n</code>", "not_parsed"),
    # a SyntaxError raised while the code runs is a failed test, not unparseable code: the
    # second one's traceback is longer than the explanation keeps, so its header is cut off
    "runtime syntax error": (
        "<code>\ndef add(a, b):\n    exec('x =')\n    return a + b\n</code>",
        "tests_failed",
    ),
    "deep runtime syntax error": (
        "<code>\ndef add(a, b, depth=40):\n"
        "    return add(a, b, depth - 1) if depth else exec('x =')\n</code>",
        "tests_failed",
    ),
    "timeout": ("<code>\ndef add(a, b):\n    while True:\n        pass\n</code>", "tests_failed"),
    "left early": ("<code>\nimport os\ndef add(a, b):\n    os._exit(0)\n</code>", "forged"),
}


def test_the_outcome_of_each_verdict_through_the_sandbox() -> None:
    judge = ExecutionEvaluator(ExecutionSettings(name="execution", timeout_s=2, cpu_s=2))
    got = {}
    for name, (completion, _) in ANSWERS.items():
        candidate = Candidate("add", name, 0, completion)
        got[name] = judge.score_one(ADD, candidate)
    assert {n: v.outcome for n, v in got.items()} == {n: k for n, (_, k) in ANSWERS.items()}
    # the reasons are those the evaluator always wrote: a compile error still reads as a
    # failed test there (the scores table is unchanged), the outcome tells them apart
    assert got["unclosed tag"].reason == "tests failed: SyntaxError: invalid syntax"
    assert got["runtime syntax error"].reason.startswith("tests failed: SyntaxError: invalid")
    untested = ExecutionEvaluator(ExecutionSettings(name="execution")).score_one(
        Task(task_id="t", source="autorl", prompt="write add"), Candidate("t", "c", 0, GOOD)
    )
    assert (untested.status, untested.outcome) == ("unscored", "no_tests")
    # the sandbox's own failure (run_python's "error" status) is unscored, with its reason
    broken = SandboxResult("error", None, False, 0.1, "", "sandbox setup failed: no report")
    run = reading(broken, Limits(timeout_s=1))
    judged = Judged(*testing.judged(run, None, "add"), run)
    verdict = ExecutionEvaluator(ExecutionSettings(name="execution"))._verdict(judged)
    assert (verdict.status, verdict.outcome) == ("unscored", "sandbox_error")
    assert set(OUTCOMES) == {*(k for _, k in ANSWERS.values()), "no_tests", "sandbox_error"}


# ------------------------------------------------------------------ metrics and the report

# One task per line: the execution verdict of each candidate, and a judge's score for it.
# The judge praises (0.95) exactly the candidates whose code never ran.
COMPILE_ERROR = 'File "/tmp/sandbox/main.py", line 3\n    ```\n    ^\nSyntaxError: invalid syntax'
CANDIDATES: dict[str, tuple[str, float]] = {
    **{f"{t}-pass": ("passed", 0.7) for t in "ABCDEF"},
    **{f"{t}-fail": ("tests_failed", 0.2) for t in "ABCDEF"},
    **{f"{t}-nocode": ("no_code", 0.95) for t in "ABC"},
    **{f"{t}-syntax": ("not_parsed", 0.95) for t in "DEF"},
    "G-pass": ("sandbox_error", 0.9),
}


def execution_row(kind_: str) -> dict[str, Any]:
    """The execution verdict the evaluator writes for each outcome."""
    return {"outcome": kind_} | {
        "passed": {"score": 1.0, "reason": "tests passed"},
        "tests_failed": {"score": 0.0, "reason": "tests failed: AssertionError"},
        "no_code": {"score": 0.0, "reason": "no code in answer"},
        "not_parsed": {
            "score": 0.0,
            "reason": "tests failed: SyntaxError: invalid syntax",
            "explanation": COMPILE_ERROR,
        },
        "sandbox_error": {"score": None, "reason": "sandbox setup failed: no report"},
    }[kind_]


def scores_frame(candidates: dict[str, tuple[str, float]]) -> pl.DataFrame:
    rows = []
    for cand, (kind_, judged) in candidates.items():
        common = {"run_id": "r", "task_id": cand[0], "candidate_id": cand, "repeat": 0,
                  "raw_score": None, "out_of_range": False, "explanation": None,
                  "latency_s": 0.1, "slot": None, "permutation": None,
                  "outcome": None}  # fmt: skip
        ex = {**common, "evaluator": "execution", "protocol": "execution", "judge": None}
        ex |= execution_row(kind_)
        ex["status"] = "scored" if ex["score"] is not None else "unscored"
        rows.append(ex)
        judge = {**common, "evaluator": "judge", "protocol": "rubric", "judge": "m"}
        rows.append(judge | {"score": judged, "reason": None, "status": "scored"})
    frame = pl.DataFrame(rows, schema=columns(ScoresSchema))
    return validate(frame, ScoresSchema, "scores")


def tasks_frame(task_ids: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "task_id": task_ids, "source": ["files"] * len(task_ids),
            "request": task_ids, "prompt": task_ids, "entry_point": ["f"] * len(task_ids),
            "test": ["assert f()"] * len(task_ids), "canonical_solution": [None] * len(task_ids),
        },
        schema=columns(TasksSchema),
    )  # fmt: skip


def rollouts_frame(cands: list[str]) -> pl.DataFrame:
    n = len(cands)
    frame = pl.DataFrame(
        {
            "task_id": [c[0] for c in cands], "sample_index": list(range(n)),
            "candidate_id": cands, "policy": ["p"] * n, "model_sha256": ["0" * 64] * n,
            "seed": [0] * n, "messages_json": ["[]"] * n, "completion": cands,
            "finish_reason": ["stop"] * n, "completion_tokens": [1] * n, "latency_s": [0.1] * n,
            "cache_key": cands,
        }
    )  # fmt: skip
    return validate(frame, RolloutsSchema, "rollouts")


SETTINGS = AnalysisSettings(bootstrap=200, seed=3, min_ci_groups=5)


def metrics_for(candidates: dict[str, tuple[str, float]]) -> dict[str, Any]:
    scores = scores_frame(candidates)
    tasks = tasks_frame(sorted({c[0] for c in candidates}))
    return compute_metrics(tasks, rollouts_frame(list(candidates)), scores, SETTINGS)


def test_truth_counts_each_outcome() -> None:
    truth = execution_truth(scores_frame(CANDIDATES))
    kinds = dict(zip(truth.table["candidate_id"], truth.table["outcome"], strict=True))
    assert kinds == {c: k for c, (k, _) in CANDIDATES.items()}
    summary = truth.summary()
    assert summary["outcomes"] == {
        "passed": 6, "tests_failed": 6, "forged": 0, "not_parsed": 3, "no_code": 3,
        "sandbox_error": 1, "no_tests": 0, "no_execution_row": 0,
    }  # fmt: skip
    assert (summary["n_passing"], summary["n_failing"], summary["n_candidates_no_truth"]) == (
        6, 12, 1,
    )  # fmt: skip
    parseable = summary["parseable"]
    assert (parseable["n_passing"], parseable["n_failing"]) == (6, 6)
    assert parseable["n_tasks_with_truth"] == 6


def test_truth_figures_on_parseable_code_only_beside_all_code() -> None:
    """The judge praises only code that never ran: on all code it praises half the failing
    candidates and misranks those pairs; on parseable code only it never praises, and ranks
    every pair right."""
    judge = metrics_for(CANDIDATES)["evaluators"]["judge"]
    everything, parseable = judge["truth"], judge["truth_parseable"]
    assert everything["n_failing"] == 12 and everything["n_false_praise"] == 6
    assert everything["false_praise_absolute"] == pytest.approx(0.5)
    assert everything["pairwise_accuracy"] == pytest.approx(0.5)  # per task: 1 of 2 pairs
    assert parseable["n_failing"] == 6 and parseable["n_false_praise"] == 0
    assert parseable["false_praise_absolute"] == 0.0 and parseable["pairwise_accuracy"] == 1.0
    assert parseable["n_candidates_no_truth"] == 7  # 6 unparseable + the sandbox error
    # a valid CI on each: 6 tasks contribute, minimum 5. Every pair right in every task: no
    # variance between tasks, so Wilson's interval at all 6 pairs, n / (n + z^2) by hand
    z2 = 1.959964**2
    assert parseable["pairwise_accuracy_ci_low"] == pytest.approx(6 / (6 + z2), abs=1e-6)
    assert parseable["pairwise_accuracy_ci_high"] == 1


def test_without_unparseable_code_both_are_the_same() -> None:
    parsed = {c: v for c, v in CANDIDATES.items() if v[0] not in ("no_code", "not_parsed")}
    judge = metrics_for(parsed)["evaluators"]["judge"]
    assert judge["truth_parseable"] == judge["truth"]


def test_the_report_says_what_kind_each_failure_was(tmp_path: Path) -> None:
    scores = scores_frame(CANDIDATES)
    tasks = tasks_frame(sorted({c[0] for c in CANDIDATES}))
    run_analysis(tasks, rollouts_frame(list(CANDIDATES)), scores, SETTINGS, tmp_path)
    md = " ".join((tmp_path / "report.md").read_text().split())
    assert (
        "Of the 12 failing candidates, 6 ran and failed (a test, or a time or memory limit), "
        "3 did not parse (a syntax error before any test ran), 3 had no code." in md
    )
    assert "Without a test result: 1 sandbox error (no verdict on the code)." in md
    assert "## Headline, parseable code only" in md
    assert (
        "on parseable code only (6 candidates without code or that did not parse left out): "
        "pairwise accuracy 1.000 [0.610, 1.000]; false praise 0.0% [0.0%, 39.0%] (0 of 6 "
        "failing candidates)." in md
    )
    html = (tmp_path / "report.html").read_text()
    assert '<table id="headline-parseable">' in html

    parsed = {c: v for c, v in CANDIDATES.items() if v[0] not in ("no_code", "not_parsed")}
    run_analysis(tasks, rollouts_frame(list(parsed)), scores_frame(parsed), SETTINGS, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "parseable code only are those shown" in md
    assert "## Headline, parseable code only" not in md
    assert "on parseable code only (" not in md


def test_the_truth_is_the_named_execution_evaluator() -> None:
    """Two execution evaluators (the original tests and the extended ones): the one named is
    the truth, the other a verdict beside it."""
    frame = scores_frame({"A-pass": ("passed", 0.7), "A-fail": ("tests_failed", 0.2)})
    strict = frame.filter(pl.col("evaluator") == "execution").with_columns(
        pl.lit("execution-extended").alias("evaluator"),
        pl.when(pl.col("candidate_id") == "A-pass")
        .then(0.0)
        .otherwise(pl.col("score"))
        .alias("score"),
    )
    both = pl.concat([frame, strict])
    assert execution_truth(both).evaluator == "execution"  # unnamed: the first by name
    named = execution_truth(both, "execution-extended")
    assert named.evaluator == "execution-extended"
    assert named.table.filter(pl.col("candidate_id") == "A-pass")["passed"].to_list() == [False]
