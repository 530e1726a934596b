"""Loud failure: which judges the scores stage names, with what line, and what the
report says first; judge-only audits' agreement figures against hand-computed values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from judgelab.analysis.judge_only import judge_agreement
from judgelab.report.as_markdown import lines as markdown_lines
from judgelab.report.failures import agreement_lines, report_blocks, structured_output_line
from judgelab.scoring import scores_frame
from judgelab.scoring.failures import (
    call_failures,
    cause_of,
    failure_message,
    fix_for,
    loud_failures,
)
from tests.unit.test_analysis import execution_outcome

LLAMA_500 = (  # what llama-cpp-python's server answers to json_schema (provider: 300 chars)
    "judge endpoint 'my-judge': HTTP 500: 1 validation error:\n  {'type': 'literal_error', "
    "'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' or "
    "'json_object'\"}"
)
HTTP_500 = f"judge call failed after 3 attempts: {LLAMA_500}"
TIMEOUT = "judge call failed after 3 attempts: judge endpoint 'my-judge': timed out after 120 s"


def row(
    evaluator: str, protocol: str, task: str, cand: str, score: float | None,
    reason: str | None = None, repeat: int = 0, judge: str | None = "my-judge",
) -> dict[str, Any]:  # fmt: skip
    return {
        "run_id": "r", "task_id": task, "candidate_id": cand, "evaluator": evaluator,
        "protocol": protocol, "judge": judge, "repeat": repeat, "score": score,
        "raw_score": score, "status": "scored" if score is not None else "unscored",
        "out_of_range": False, "reason": reason, "explanation": None, "latency_s": 0.1,
        "slot": None, "permutation": None,
        "outcome": execution_outcome(score, reason) if protocol == "execution" else None,
    }  # fmt: skip


def ruler_rows(name: str, groups: dict[str, list[float | None]], reason: str | None = None):
    return [
        row(name, "ruler", task, f"{task}-c{i}", s, None if s is not None else reason)
        for task, scores in groups.items()
        for i, s in enumerate(scores)
    ]


def test_a_judge_that_scored_nothing_is_loud_with_its_cause_and_fix() -> None:
    rows = ruler_rows("ruler-mine", {"a": [None, None], "b": [None, None, None]}, HTTP_500)
    rows += [row("rubric-mine", "rubric", "a", f"a-c{i}", 0.5) for i in range(2)]
    rows += [row("execution", "execution", "a", f"a-c{i}", 1.0, judge=None) for i in range(2)]
    found = {f.evaluator: f for f in call_failures(scores_frame(rows), 0.5)}
    assert set(found) == {"ruler-mine", "rubric-mine"}  # no line for the truth
    ruler = found["ruler-mine"]
    assert (ruler.calls, ruler.failed, ruler.candidates, ruler.scored) == (2, 2, 5, 0)
    assert ruler.loud and not found["rubric-mine"].loud
    assert ruler.cause == LLAMA_500
    line = ruler.line()
    assert line.startswith("ruler-mine: 2 of 2 judge calls failed, 0 of 5 candidates scored;")
    assert "commonest cause (2 calls): judge endpoint 'my-judge': HTTP 500" in line
    assert "fix: models.my-judge.structured_output: json_object" in line
    message = failure_message(loud_failures(scores_frame(rows), 0.5), "data/scores/x.parquet")
    assert message.splitlines() == [
        "1 judge(s) failed; the scores table was written to data/scores/x.parquet:",
        f"  {line}",
    ]


def test_the_share_of_one_cause_decides() -> None:
    # rubric: 4 calls, 3 timed out, 1 scored -> 3/4 > 0.5 is loud; 3/4 < 0.8 is not
    rows = [row("rubric-mine", "rubric", "a", "a-c0", 0.9)]
    rows += [row("rubric-mine", "rubric", "a", f"a-c{i}", None, TIMEOUT) for i in (1, 2, 3)]
    frame = scores_frame(rows)
    (loud,) = loud_failures(frame, 0.5)
    assert (loud.calls, loud.failed, loud.cause_calls) == (4, 3, 3)
    assert "fix: models.my-judge.timeout_s" in loud.line()
    assert "(failed share over scores.max_failure_share = 0.5)" in loud.line()
    assert loud_failures(frame, 0.8) == []


def test_the_share_of_all_failed_calls_decides_whatever_their_causes() -> None:
    """README's example against a serial server: of 7 rubric calls, 1 timed out and 1 was
    refused: 2/7 = 0.29 failed, no cause above 1/7; over a share of 0.1, under 0.3."""
    rows = [row("rubric-mine", "rubric", "a", "a-c0", None, TIMEOUT)]
    rows.append(row("rubric-mine", "rubric", "a", "a-c1", None, HTTP_500))
    rows += [row("rubric-mine", "rubric", "a", f"a-c{i}", 0.5) for i in range(2, 7)]
    frame = scores_frame(rows)
    (loud,) = loud_failures(frame, 0.1)
    assert (loud.calls, loud.failed, loud.cause_calls, loud.scored) == (7, 2, 1, 5)
    assert loud.line().startswith(
        "rubric-mine: 2 of 7 judge calls failed, 5 of 7 candidates scored (failed share over "
        "scores.max_failure_share = 0.1); commonest cause (1 calls): "
    )
    assert loud_failures(frame, 0.3) == []
    assert loud_failures(frame, 2 / 7) == []  # at the share is not over it


def test_out_of_range_scores_are_no_failed_calls_but_a_judge_that_scored_none_is_loud() -> None:
    rows = [
        row("ruler-mine", "ruler", "a", f"a-c{i}", None, "out of range: raw score 7")
        for i in range(2)
    ]
    (loud,) = loud_failures(scores_frame(rows), 0.5)
    assert (loud.failed, loud.cause) == (0, None)
    assert loud.line() == (
        "ruler-mine: 0 of 1 judge calls failed, 0 of 2 candidates scored; no call failed; "
        "commonest reason left unscored: out of range: raw score 7"
    )


@pytest.mark.parametrize(
    ("cause", "fix"),
    [
        ("judge endpoint 'j': HTTP 401 request rejected: bad key", "models.j.api_key_env"),
        ("judge endpoint 'j': HTTP 404 request rejected: no model", "models.j.base_url and"),
        ("judge endpoint 'j': HTTP 429 rate limited: slow down", "models.j.max_concurrency"),
        ("judge endpoint 'j': connection failed (APIConnectionError)", "models.j.base_url"),
        (
            "judge endpoint 'j': HTTP 400 request rejected: response_format json_schema "
            "unsupported",
            "models.j.structured_output: json_object",
        ),  # fmt: skip
        (
            "invalid JSON or schema mismatch (1 error(s); score: missing)",
            "models.j.structured_output (json_schema",
        ),  # fmt: skip
        ("judge endpoint 'j': HTTP 500: CUDA out of memory", None),
    ],
)
def test_fixes_name_the_setting(cause: str, fix: str | None) -> None:
    found = fix_for(cause, "j", "ruler-j")
    assert found is None if fix is None else found is not None and found.startswith(fix)


def test_cause_strips_only_the_attempts_prefix() -> None:
    assert cause_of("judge reply error after 1 attempt: empty reply") == "empty reply"
    assert cause_of("no tests") is None
    assert cause_of("out of range: raw score 3") is None


def test_the_report_says_it_first_and_names_detected_modes() -> None:
    metrics = {"judge_failures": ["ruler-mine: 2 of 2 judge calls failed, ..."]}
    lines = markdown_lines(report_blocks(metrics))
    assert lines[0] == "## Judges that failed"
    assert "- ruler-mine: 2 of 2 judge calls failed, ..." in lines
    assert report_blocks({}) == []
    modes = {"my-judge": {"mode": "json_object", "source": "probe", "detail": "x"}}
    assert structured_output_line(modes) == "; structured output: my-judge `json_object` (detected)"
    assert structured_output_line(None) == ""


def test_judge_only_agreement_against_hand_computed_values() -> None:
    # two judges, three candidates of one task; no execution evaluator
    a = [0.1, 0.5, 0.9]
    b = [0.2, 0.9, 0.4]  # ranks: a 1<2<3, b 1<3<2: concordant pairs (1,2), (1,3); discordant (2,3)
    rows = [row("ruler-a", "ruler", "t", f"t-c{i}", s) for i, s in enumerate(a)]
    rows += [row("rubric-b", "rubric", "t", f"t-c{i}", s) for i, s in enumerate(b)]
    agree = judge_agreement(scores_frame(rows))
    assert agree is not None
    (pair,) = agree["pairs"]
    assert pair["n_candidates"] == 3
    assert pair["kendall_tau_b"] == pytest.approx((2 - 1) / 3)
    # Krippendorff's interval alpha by hand: 3 units of 2 values each, n = 6 pairable values
    values = a + b
    d_o = sum(2 * (x - y) ** 2 for x, y in zip(a, b, strict=True)) / 6  # m_u - 1 = 1
    d_e = sum((x - y) ** 2 for x in values for y in values) / (6 * 5)
    assert agree["krippendorff_alpha"] == pytest.approx(1 - d_o / d_e)
    assert agree["n_candidates"] == 3
    metrics = {"judge_only": agree}
    lines = agreement_lines(metrics)
    assert lines[0].startswith(
        "Judge-only audit: no execution evaluator, so nothing here is ranked"
    )
    assert f"Kendall's tau-b of {pair['a']} and {pair['b']}: 0.333 (n = 3 candidates" in lines[2]
    assert markdown_lines(report_blocks(metrics))[0] == "## Judge-only audit"
    # with the truth present there is no judge-only section
    rows.append(row("execution", "execution", "t", "t-c0", 1.0, judge=None))
    assert judge_agreement(scores_frame(rows)) is None


def test_the_failure_share_is_no_part_of_the_run_id() -> None:
    from judgelab.config import parse_settings
    from judgelab.scoring import run_id_for

    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "params.yaml").read_text())
    frame = pl.DataFrame({"candidate_id": ["c1", "c2"]})
    ids = set()
    for share in (0.5, 0.9):
        data["scores"]["max_failure_share"] = share
        ids.add(run_id_for(parse_settings(data), frame))
    assert len(ids) == 1
    data["scores"]["repeats"] = 2  # while a setting that changes scores does change it
    assert run_id_for(parse_settings(data), frame) not in ids


def test_run_analysis_says_failures_and_judge_only_first(tmp_path: Path) -> None:
    """End to end through run_analysis: with no execution evaluator and a judge that scored
    nothing, report.md opens with both sections, before any figure or ranking."""
    from judgelab.config import AnalysisSettings
    from judgelab.report.outputs import run_analysis
    from tests.unit.test_analysis import fixture_rollouts, fixture_scores, fixture_tasks

    scores = fixture_scores().filter(pl.col("protocol") != "execution")
    metrics = run_analysis(
        fixture_tasks(), fixture_rollouts(), scores, AnalysisSettings(bootstrap=20), tmp_path
    )
    (dead,) = metrics["judge_failures"]  # "dead" timed out on every call
    assert dead.endswith("no call failed; commonest reason left unscored: timeout: 120 s")
    assert metrics["judge_only"]["judges"] == ["dead", "judge", "rub"]
    report = (tmp_path / "report.md").read_text()
    sections = [s.split("\n", 1)[0] for s in report.split("\n## ")[1:]]
    assert sections[:2] == ["Judges that failed", "Judge-only audit"]
    assert f"- {dead}" in report
    assert "nothing here is ranked against the tests" in report
    html = (tmp_path / "report.html").read_text()
    assert (
        html.index("Judges that failed") < html.index("Judge-only audit") < html.index("Headline")
    )
