"""Evaluator kinds: each kind's settings and the evaluator class that scores with them.

Every entry of `scores.evaluators` in params.yaml names its `kind`. `KINDS` maps a kind to
its settings model (pydantic: frozen, no unknown keys; an error names the key) and to a
function that imports its evaluator class, called only when the first evaluator of that kind
is built, so ART and litellm stay off the import path until an LLM judge is. An unknown kind
is an error that lists the valid ones. A kind's settings say whether it calls a judge model
(`judge_model`) and how many times the scores stage runs it (`repeats`); nothing else asks
what kind an evaluator is. Adding a kind: docs/ADDING_AN_EVALUATOR.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    SerializeAsAny,
    model_serializer,
)
from pydantic_core import PydanticCustomError

from judgelab.errors import ConfigError

if TYPE_CHECKING:
    from judgelab.cache import JsonCache
    from judgelab.evaluators.base import Evaluator
    from judgelab.models.endpoint import Endpoint


class EvaluatorSettings(BaseModel):
    """What every kind's settings have; each kind adds ``kind: Literal["<kind>"]`` and its own
    keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")  # as every judgelab.config section

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")

    @property
    def judge_model(self) -> str | None:
        """The `models` entry this evaluator calls, or None when it calls no model."""
        return None

    def repeats(self, scores_repeats: int) -> int:
        """How many times the scores stage runs it: a judge that samples a model
        `scores.repeats` times, a deterministic evaluator once (repeat 0)."""
        return 1 if self.judge_model is None else scores_repeats

    def in_given_order(self) -> EvaluatorSettings:
        """These settings with the candidates judged in the order given: a kind that shuffles
        them does not; any other is unchanged."""
        return self


class LLMJudgeSettings(EvaluatorSettings):
    """An evaluator that asks the model named by its `judge` key (declared by each kind, so
    its keys keep their order in params.yaml and docs/CONFIG.md)."""

    @property
    def judge_model(self) -> str:
        return self.judge  # type: ignore[attr-defined, no-any-return]


class FormatEvaluator(EvaluatorSettings):
    kind: Literal["format"] = "format"


class SyntaxEvaluator(EvaluatorSettings):
    kind: Literal["syntax"] = "syntax"


class ExecutionEvaluator(EvaluatorSettings):
    kind: Literal["execution"] = "execution"
    timeout_s: float = Field(10.0, gt=0, le=600)
    cpu_s: float = Field(10.0, gt=0, le=600)
    memory_mb: int = Field(1024, ge=64, le=65536)


class JudgeCallSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(0.0, ge=0, le=2)
    max_tokens: int | None = Field(
        None,
        ge=16,
        le=8192,
        description="Output tokens per judge call. Unset: enough for the longest reply the "
        "bounded schema allows, (explanation_max_chars + 128) per scored candidate + 32, "
        "because a small model can spend a token per character and a cut-off reply is "
        "wasted (1024 for RULER over 4 candidates at the default bound).",
    )
    retries: int = Field(2, ge=0, le=10, description="Extra attempts after a failed call.")
    backoff_s: float = Field(1.0, ge=0, le=120)
    out_of_range: Literal["unscore", "clip"] = Field(
        "unscore",
        description="Reward policy for a raw score outside [0, 1]: leave the candidate "
        "unscored (default) or clip into [0, 1]. The raw score is kept either way.",
    )
    explanation_max_chars: int = Field(
        120,
        ge=16,
        le=4000,
        description="Bound on each explanation the judge writes: a judge's output tokens under "
        "a JSON grammar dominate its time on CPU.",
    )
    seed: int = 0


class RulerEvaluator(LLMJudgeSettings):
    kind: Literal["ruler"] = "ruler"
    judge: str
    shuffle: bool = True
    rubric: str | None = Field(
        None,
        min_length=1,
        description="RULER's rubric (ART's `rubric` argument), the part of the judge prompt "
        "ART users tune; unset: ART's default. Part of the run id and of every judge call's "
        "cache key (it is in the prompt).",
    )
    call: JudgeCallSettings = JudgeCallSettings()

    def in_given_order(self) -> RulerEvaluator:
        return self.model_copy(update={"shuffle": False})


class RubricEvaluator(LLMJudgeSettings):
    kind: Literal["rubric"] = "rubric"
    judge: str
    rubric: str | None = Field(
        None,
        min_length=1,
        description="The grading rubric: the part of the pointwise prompt between the answer "
        "and the reply format (which stays: a score from 0 to 1 and an explanation). Unset: "
        "judgelab's code-review rubric (docs/JUDGES.md). Part of the run id and of every "
        "judge call's cache key (it is in the prompt).",
    )
    call: JudgeCallSettings = JudgeCallSettings()

    @model_serializer(mode="wrap")
    def _unset_rubric_left_out(self, handler: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        # An unset rubric leaves the run ids of runs made before the setting existed as they
        # were (the run id is a digest of the settings).
        out = handler(self)
        if out.get("rubric") is None:
            out.pop("rubric", None)
        return out


@dataclass(frozen=True)
class Kind:
    settings: type[EvaluatorSettings]
    evaluator: Callable[[], type[Evaluator]]  # imports the class: called on the first build


# The imports sit in functions: an evaluator's module is loaded only when one is built.
def _format() -> type[Evaluator]:
    from judgelab.evaluators.rules import FormatJudge

    return FormatJudge


def _syntax() -> type[Evaluator]:
    from judgelab.evaluators.rules import SyntaxJudge

    return SyntaxJudge


def _execution() -> type[Evaluator]:
    from judgelab.evaluators.execution import ExecutionJudge

    return ExecutionJudge


def _ruler() -> type[Evaluator]:
    from judgelab.evaluators.ruler import RulerJudge  # ART and litellm

    return RulerJudge


def _rubric() -> type[Evaluator]:
    from judgelab.evaluators.rubric import RubricJudge  # litellm

    return RubricJudge


KINDS: dict[str, Kind] = {
    "format": Kind(FormatEvaluator, _format),
    "syntax": Kind(SyntaxEvaluator, _syntax),
    "execution": Kind(ExecutionEvaluator, _execution),
    "ruler": Kind(RulerEvaluator, _ruler),
    "rubric": Kind(RubricEvaluator, _rubric),
}


def _valid_kinds() -> str:
    return ", ".join(repr(k) for k in KINDS)


def parse_spec(value: Any) -> EvaluatorSettings:
    """One `scores.evaluators` entry, validated by its kind's settings model."""
    if isinstance(value, EvaluatorSettings):
        return value
    if not isinstance(value, dict):
        raise PydanticCustomError("evaluator", "an evaluator is a mapping with a name and a kind")
    kind = value.get("kind")
    if kind is None:
        raise PydanticCustomError(
            "evaluator_kind", "no kind given; valid kinds: {valid}", {"valid": _valid_kinds()}
        )
    if not isinstance(kind, str) or kind not in KINDS:
        raise PydanticCustomError(
            "evaluator_kind",
            "unknown evaluator kind {kind}; valid kinds: {valid}",
            {"kind": repr(kind), "valid": _valid_kinds()},
        )
    return KINDS[kind].settings.model_validate(value)


# The settings of any registered kind. SerializeAsAny: a dump keeps the kind's own keys.
EvaluatorSpec = SerializeAsAny[Annotated[EvaluatorSettings, PlainValidator(parse_spec)]]


def evaluator_class(kind: str) -> type[Evaluator]:
    """The class that scores evaluators of `kind` (its module is imported now)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown evaluator kind {kind!r}; valid kinds: {_valid_kinds()}")
    return KINDS[kind].evaluator()


def build_evaluator(
    spec: EvaluatorSettings, endpoints: Mapping[str, Endpoint], cache: JsonCache | None = None
) -> Evaluator:
    """The evaluator for `spec`; an LLM judge gets the endpoint of its judge model and the
    judge cache."""
    cls = evaluator_class(spec.kind)  # type: ignore[attr-defined]
    if spec.judge_model is None:
        return cls(spec)
    return cls(spec, endpoints[spec.judge_model], cache)  # type: ignore[call-arg]
