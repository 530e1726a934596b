"""Evaluator kinds: the class that scores each kind's settings.

Each kind's settings class in `judgelab.config.evaluators` names the class that scores it
(its `evaluator`, "module:Class"): that is the kind's registration, and `SETTINGS` there lists
the kinds. The module is imported only when the first evaluator of the kind is built, so ART
and litellm stay off the import path until an LLM judge is. Adding a kind:
docs/ADDING_AN_EVALUATOR.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import TYPE_CHECKING

from judgelab.config.evaluators import SETTINGS, EvaluatorSettings, valid_kinds
from judgelab.errors import ConfigError

if TYPE_CHECKING:
    from judgelab.cache import JsonCache
    from judgelab.evaluators.base import Evaluator
    from judgelab.models.endpoint import Endpoint


def evaluator_class(kind: str) -> type[Evaluator]:
    """The class that scores evaluators of `kind` (its module is imported now)."""
    if kind not in SETTINGS:
        raise ConfigError(f"unknown evaluator kind {kind!r}; valid kinds: {valid_kinds()}")
    module, _, name = SETTINGS[kind].evaluator.partition(":")
    cls: type[Evaluator] = getattr(import_module(module), name)
    return cls


def build_evaluator(
    spec: EvaluatorSettings, endpoints: Mapping[str, Endpoint], cache: JsonCache | None = None
) -> Evaluator:
    """The evaluator for `spec`; an LLM judge gets the endpoint of its judge model and the
    judge cache."""
    cls = evaluator_class(spec.kind)  # type: ignore[attr-defined]
    if spec.judge_model is None:
        return cls(spec)
    return cls(spec, endpoints[spec.judge_model], cache)  # type: ignore[call-arg]
