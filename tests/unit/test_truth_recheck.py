"""The execution truth re-check (analysis/recheck.py, report/recheck.py): counts by hand,
the baseline file's errors, and the report's sentence against the figures it names."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from judgelab.analysis.recheck import read_baseline, truth_recheck
from judgelab.errors import ConfigError
from judgelab.report.outputs import run_analysis
from judgelab.report.recheck import TITLE, sentence
from tests.unit.test_analysis import SETTINGS, fixture_rollouts, fixture_scores, fixture_tasks


def slim(rows: list[tuple[str, float | None, str]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={"candidate_id": pl.String, "score": pl.Float64, "outcome": pl.String},
        orient="row",
    )


TRUTH_IDS = ("a1", "a2", "a3", "a4", "b1", "b2", "b3", "c1", "c2")
# The fixture's execution verdicts: a1 a2 b1 pass, a3 a4 b2 b3 fail, c1 c2 have no tests.
BASELINE = slim(
    [
        ("a1", 0.0, "tests_failed"),  # the score changed: it passes now
        ("a2", 1.0, "passed"),
        ("a3", 0.0, "forged"),  # the outcome changed, the score did not
        ("a4", 0.0, "tests_failed"),
        ("c1", None, "no_tests"),  # a null score equals a null score
        ("z9", 1.0, "passed"),  # not in this run
    ]
)


def test_recheck_by_hand() -> None:
    block = truth_recheck(BASELINE, fixture_scores(), "inputs/old.parquet")
    assert {k: v for k, v in block.items() if k != "changed"} == {
        "baseline": "inputs/old.parquet",
        "n_baseline": 6,
        "n_compared": 5,
        "n_changed": 2,
        "n_absent": 1,
    }
    assert block["changed"] == [
        {
            "candidate_id": "a1",
            "task_id": None,
            "was": {"score": 0.0, "outcome": "tests_failed"},
            "now": {"score": 1.0, "outcome": "passed"},
        },
        {
            "candidate_id": "a3",
            "task_id": None,
            "was": {"score": 0.0, "outcome": "forged"},
            "now": {"score": 0.0, "outcome": "tests_failed"},
        },
    ]


def test_repeats_that_disagree_count_once_and_list_each_differing_verdict() -> None:
    scores = fixture_scores()
    flaky = scores.filter(pl.col("candidate_id") == "a2", pl.col("protocol") == "execution")
    flaky = flaky.with_columns(
        repeat=pl.lit(1, pl.Int64), score=0.0, outcome=pl.lit("tests_failed")
    )
    block = truth_recheck(BASELINE, pl.concat([scores, flaky]), "b")
    assert (block["n_compared"], block["n_changed"], block["n_absent"]) == (5, 3, 1)
    assert [(c["candidate_id"], c["now"]["outcome"]) for c in block["changed"]] == [
        ("a1", "passed"),
        ("a2", "tests_failed"),
        ("a3", "tests_failed"),
    ]


def test_a_scores_table_is_a_baseline_of_its_execution_rows(tmp_path: Path) -> None:
    path = tmp_path / "scores.parquet"
    fixture_scores().write_parquet(path)
    baseline = read_baseline(path)
    assert baseline.columns == ["candidate_id", "task_id", "score", "outcome"]
    assert sorted(baseline["candidate_id"]) == sorted(TRUTH_IDS)
    block = truth_recheck(baseline, fixture_scores(), "s")
    assert (block["n_compared"], block["n_changed"], block["n_absent"]) == (9, 0, 0)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (None, "does not exist"),
        (slim([("a1", 1.0, "passed")]).drop("outcome"), "has no column outcome"),
        (slim([("a1", 1.0, "passed"), ("a1", 0.0, "tests_failed")]), "candidate a1 more than one"),
        (slim([("a1", 1.0, "passed"), ("a2", 1.0, None)]), "candidate a2 has no outcome (1 of 2"),
        (slim([]), "has no execution verdicts"),
    ],
)
def test_a_bad_baseline_names_the_field_the_file_and_the_problem(
    tmp_path: Path, frame: pl.DataFrame | None, message: str
) -> None:
    path = tmp_path / "old.parquet"
    if frame is not None:
        frame.write_parquet(path)
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        read_baseline(path)
    assert str(err.value).startswith(f"analysis.truth_baseline: {path}")


def test_the_report_says_what_the_figures_say(tmp_path: Path) -> None:
    metrics = run_analysis(
        fixture_tasks(), fixture_rollouts(), fixture_scores(), SETTINGS, tmp_path,
        truth_baseline=BASELINE,
    )  # fmt: skip
    block = metrics["truth_recheck"]
    report = (tmp_path / "report.md").read_text()
    assert sentence(block) in report
    said = re.search(
        r"scored again (\d+) of the (\d+) candidates .*: (\d+) of the (\d+) verdicts changed.*; "
        r"(\d+) of its candidates are not in this run",
        report,
    )
    assert said is not None
    n, total, changed, n_again, absent = map(int, said.groups())
    assert (n, total, changed, n_again, absent) == (
        block["n_compared"], block["n_baseline"], block["n_changed"], block["n_compared"],
        block["n_absent"],
    )  # fmt: skip
    table = report.split(f"## {TITLE}")[1].split("\n## ")[0]
    assert [ln.split(" | ")[0].strip("| ") for ln in table.splitlines() if ln.startswith("| a")] \
        == [c["candidate_id"] for c in block["changed"]]  # fmt: skip
    assert "1, passed" in table and "0, forged" in table
    assert TITLE in (tmp_path / "report.html").read_text()


def test_no_baseline_no_block_and_no_section(tmp_path: Path) -> None:
    metrics = run_analysis(
        fixture_tasks(), fixture_rollouts(), fixture_scores(), SETTINGS, tmp_path
    )
    assert "truth_recheck" not in metrics
    assert TITLE not in (tmp_path / "report.md").read_text()


def test_nothing_changed_says_so_without_an_absent_clause() -> None:
    block = {"baseline": "b", "n_baseline": 128, "n_compared": 128, "n_changed": 0, "n_absent": 0}
    assert sentence(block) == (
        "This run's execution evaluator scored again 128 of the 128 candidates whose verdicts "
        "`b` holds: 0 of the 128 verdicts changed (score or outcome)."
    )
