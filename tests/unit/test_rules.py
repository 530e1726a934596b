"""Rule-based evaluators: the format and syntax checks, on hand-written answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgelab.config.evaluators import FormatSettings, SyntaxSettings
from judgelab.evaluators.rules import FormatEvaluator, SyntaxEvaluator
from judgelab.verdicts import Candidate, Task, Verdict

TASK = Task(task_id="t1", source="autorl", prompt="write a function that adds two numbers")
GOOD = (
    "<request>write a function that adds two numbers</request>\n"
    "<language>Python</language>\n"
    "<code>\ndef add(a, b):\n    return a + b\n</code>"
)


def _score(judge: FormatEvaluator | SyntaxEvaluator, completion: str) -> Verdict:
    candidate = Candidate(task_id="t1", candidate_id="c1", sample_index=0, completion=completion)
    [verdict] = judge.score_group(TASK, [candidate])
    return verdict


@pytest.fixture
def fmt() -> FormatEvaluator:
    return FormatEvaluator(FormatSettings(name="format"))


@pytest.fixture
def syntax() -> SyntaxEvaluator:
    return SyntaxEvaluator(SyntaxSettings(name="syntax"))


def test_judges_carry_name_and_protocol(fmt: FormatEvaluator, syntax: SyntaxEvaluator) -> None:
    assert (fmt.name, fmt.protocol) == ("format", "rule")
    assert (syntax.name, syntax.protocol) == ("syntax", "rule")


def test_format_all_three_tags_scores_one(fmt: FormatEvaluator) -> None:
    v = _score(fmt, GOOD)
    assert (v.status, v.score) == ("scored", 1.0)


@pytest.mark.parametrize(
    ("completion", "score", "named"),
    [
        ("<request>r</request><language>Python</language>", 2 / 3, ["<code>: missing"]),
        ("<code>x = 1</code>", 1 / 3, ["<request>: missing", "<language>: missing"]),
        ("just prose, no tags", 0.0, ["<request>", "<language>", "<code>"]),
        ("```python\nx = 1\n```", 0.0, ["<code>: missing"]),  # a fence is not the tag
        ("<request>r</request><language> </language><code>x</code>", 2 / 3, ["<language>: empty"]),
        ("<request>r</request><language>Py</language><code>x = 1", 2 / 3, ["<code>: 1 opening"]),
        (
            "<request>r</request><language>Py</language><code>a</code><code>b</code>",
            2 / 3,
            ["<code>: 2 opening and 2 closing"],
        ),
        ("</request>r<request><language>Py</language><code>x</code>", 2 / 3, ["before opening"]),
    ],
)
def test_format_partial_credit_names_what_is_wrong(
    fmt: FormatEvaluator, completion: str, score: float, named: list[str]
) -> None:
    v = _score(fmt, completion)
    assert v.status == "scored"
    assert v.score == pytest.approx(score)
    assert v.explanation is not None
    for fragment in named:
        assert fragment in v.explanation


def test_syntax_valid_python_scores_one(syntax: SyntaxEvaluator) -> None:
    v = _score(syntax, GOOD)
    assert (v.status, v.score) == ("scored", 1.0)


def test_syntax_error_scores_zero_with_line(syntax: SyntaxEvaluator) -> None:
    broken = GOOD.replace("return a + b", "return a +")
    v = _score(syntax, broken)
    assert (v.status, v.score) == ("scored", 0.0)
    assert v.reason is not None and v.reason.startswith("SyntaxError")
    assert "(line 2)" in v.reason


def test_indentation_error_is_a_syntax_error(syntax: SyntaxEvaluator) -> None:
    v = _score(syntax, "<code>\ndef f():\nreturn 1\n</code>")
    assert v.score == 0.0
    assert v.reason is not None and "IndentationError" in v.reason


def test_no_code_scores_zero(syntax: SyntaxEvaluator) -> None:
    v = _score(syntax, "<request>r</request><language>Python</language> I cannot do that.")
    assert (v.status, v.score, v.reason) == ("scored", 0.0, "no code in answer")


def test_non_python_language_is_unscored(syntax: SyntaxEvaluator) -> None:
    v = _score(syntax, "<language>JavaScript</language><code>const f = () => 1;</code>")
    assert v.status == "unscored" and v.score is None
    assert v.reason == "syntax check supports Python only (language: JavaScript)"


@pytest.mark.parametrize("language", ["Python", "python3", "Python 3.11", "py"])
def test_python_language_names_are_checked(syntax: SyntaxEvaluator, language: str) -> None:
    v = _score(syntax, f"<language>{language}</language><code>def f(:\n</code>")
    assert (v.status, v.score) == ("scored", 0.0)


def test_fenced_code_without_tags_is_checked(syntax: SyntaxEvaluator) -> None:
    assert _score(syntax, "Here:\n```python\nx = [1, 2\n```").score == 0.0
    assert _score(syntax, "Here:\n```python\nx = [1, 2]\n```").score == 1.0


def test_syntax_check_never_runs_the_code(syntax: SyntaxEvaluator, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')\nraise SystemExit(1)"
    v = _score(syntax, f"<language>Python</language><code>{code}</code>")
    assert v.score == 1.0
    assert not marker.exists()


def test_null_bytes_do_not_crash_the_judge(syntax: SyntaxEvaluator) -> None:
    v = _score(syntax, "<code>x = 1\x00</code>")
    assert (v.status, v.score) == ("scored", 0.0)
