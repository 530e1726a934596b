"""Evaluator kinds: the class that scores each kind's settings (`judgelab.config.evaluators`).

`CLASSES` maps a kind to a function that imports its evaluator class, called only when the
first evaluator of that kind is built, so ART and litellm stay off the import path until an
LLM judge is. Adding a kind: docs/ADDING_AN_EVALUATOR.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from judgelab.config.evaluators import EvaluatorSettings, valid_kinds
from judgelab.errors import ConfigError

if TYPE_CHECKING:
    from judgelab.cache import JsonCache
    from judgelab.evaluators.base import Evaluator
    from judgelab.models.endpoint import Endpoint


# The imports sit in functions: an evaluator's module is loaded only when one is built.
def _format() -> type[Evaluator]:
    from judgelab.evaluators.rules import FormatEvaluator

    return FormatEvaluator


def _syntax() -> type[Evaluator]:
    from judgelab.evaluators.rules import SyntaxEvaluator

    return SyntaxEvaluator


def _execution() -> type[Evaluator]:
    from judgelab.evaluators.execution import ExecutionEvaluator

    return ExecutionEvaluator


def _ruler() -> type[Evaluator]:
    from judgelab.evaluators.ruler import RulerJudge  # ART and litellm

    return RulerJudge


def _rubric() -> type[Evaluator]:
    from judgelab.evaluators.rubric import RubricJudge  # litellm

    return RubricJudge


# kind -> a function that imports the class scoring it (the kinds of settings.SETTINGS)
CLASSES: dict[str, Callable[[], type[Evaluator]]] = {
    "format": _format,
    "syntax": _syntax,
    "execution": _execution,
    "ruler": _ruler,
    "rubric": _rubric,
}


def evaluator_class(kind: str) -> type[Evaluator]:
    """The class that scores evaluators of `kind` (its module is imported now)."""
    if kind not in CLASSES:
        raise ConfigError(f"unknown evaluator kind {kind!r}; valid kinds: {valid_kinds()}")
    return CLASSES[kind]()


def build_evaluator(
    spec: EvaluatorSettings, endpoints: Mapping[str, Endpoint], cache: JsonCache | None = None
) -> Evaluator:
    """The evaluator for `spec`; an LLM judge gets the endpoint of its judge model and the
    judge cache."""
    cls = evaluator_class(spec.kind)  # type: ignore[attr-defined]
    if spec.judge_model is None:
        return cls(spec)
    return cls(spec, endpoints[spec.judge_model], cache)  # type: ignore[call-arg]
