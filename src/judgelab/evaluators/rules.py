"""Rule-based evaluators: pure functions of the completion text. Nothing is executed.

FormatEvaluator  score = fraction of the experiment's three tags (<request>, <language>,
             <code>) that are present and well-formed; the explanation names each tag
             that is not and why.
SyntaxEvaluator  1.0 when the extracted code parses as Python (`ast.parse`, which compiles to a
             syntax tree and runs nothing), 0.0 with the SyntaxError and its line when it
             does not, 0.0 "no code in answer" when there is no code, and *unscored* when
             the <language> tag names a language other than Python: we cannot judge it.
"""

from __future__ import annotations

import ast
import re
import time
import warnings
from dataclasses import replace

from judgelab.answer import parse_answer
from judgelab.config.evaluators import FormatSettings, SyntaxSettings
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.verdicts import Candidate, Task, Verdict

TAGS = ("request", "language", "code")
PYTHON_NAMES = {"python", "python3", "python 3", "py", "python3.x", "python 3.x"}


def tag_problem(text: str, tag: str) -> str | None:
    """Why `<tag>...</tag>` is not well-formed in `text`, or None when it is.

    Well-formed: exactly one opening and one closing tag, in that order, with non-blank
    content between them.
    """
    opens = [m.start() for m in re.finditer(rf"<{tag}>", text)]
    closes = [m.start() for m in re.finditer(rf"</{tag}>", text)]
    if not opens and not closes:
        return "missing"
    if len(opens) != 1 or len(closes) != 1:
        return f"{len(opens)} opening and {len(closes)} closing tags (expected 1 and 1)"
    if closes[0] < opens[0]:
        return "closing tag before opening tag"
    if not text[opens[0] + len(tag) + 2 : closes[0]].strip():
        return "empty"
    return None


def is_python(language: str) -> bool:
    name = language.strip().lower()
    return name in PYTHON_NAMES or re.fullmatch(r"python\s*3?(\.\d+)*", name) is not None


class FormatEvaluator(PointwiseEvaluator):
    """Fraction of the three answer tags present and well-formed."""

    protocol = FormatSettings.protocol

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        # `repeat` is accepted for the common evaluator signature; rules are deterministic.
        started = time.perf_counter()
        problems = {tag: p for tag in TAGS if (p := tag_problem(candidate.completion, tag))}
        score = (len(TAGS) - len(problems)) / len(TAGS)
        latency = time.perf_counter() - started
        if not problems:
            return Verdict.scored(1.0, explanation="all three tags well-formed", latency_s=latency)
        explanation = "; ".join(f"<{tag}>: {why}" for tag, why in problems.items())
        reason = f"{len(problems)} of {len(TAGS)} tags missing or malformed"
        return Verdict.scored(score, reason=reason, explanation=explanation, latency_s=latency)


class SyntaxEvaluator(PointwiseEvaluator):
    """Does the extracted code parse as Python?"""

    protocol = SyntaxSettings.protocol

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        # `repeat` is accepted for the common evaluator signature; rules are deterministic.
        started = time.perf_counter()
        verdict = self._judge(candidate.completion)
        return replace(verdict, latency_s=time.perf_counter() - started)

    @staticmethod
    def _judge(completion: str) -> Verdict:
        answer = parse_answer(completion)
        if answer.language and not is_python(answer.language):
            language = answer.language[:40]
            return Verdict.unscored(f"syntax check supports Python only (language: {language})")
        if answer.code is None:
            return Verdict.scored(0.0, reason="no code in answer")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SyntaxWarning for odd escapes is not an error
                ast.parse(answer.code)
        except SyntaxError as err:
            where = f" (line {err.lineno})" if err.lineno else ""
            text = (err.text or "").strip()[:120]
            return Verdict.scored(
                0.0, reason=f"{type(err).__name__}: {err.msg}{where}", explanation=text or None
            )
        except (ValueError, RecursionError, MemoryError) as err:  # null bytes, absurd nesting
            return Verdict.scored(0.0, reason=f"does not parse: {type(err).__name__}: {err}")
        return Verdict.scored(1.0)
