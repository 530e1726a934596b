"""Each evaluator kind's settings (pydantic: frozen, no unknown keys) and `EvaluatorSpec`, the
type of a `scores.evaluators` entry, validated by its `kind`'s model. The class that scores
each kind: `judgelab.evaluators.registry`, which imports these."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    SerializeAsAny,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError


class EvaluatorSettings(BaseModel):
    """What every kind's settings have; each kind adds ``kind: Literal["<kind>"]`` and its own
    keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")  # as every judgelab.config section

    # The scores table's `protocol` of this kind's rows: rule, execution, ruler or rubric.
    protocol: ClassVar[str]
    # True for a kind that scores a group in one call (RULER): its scores are relative.
    scores_groups: ClassVar[bool] = False
    # The class that scores this kind, as "module:Class": the registration of the kind
    # (`judgelab.evaluators.registry` imports it when the first such evaluator is built, so
    # ART and litellm stay off the import path of a stage that builds no LLM judge).
    evaluator: ClassVar[str]

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


class FormatSettings(EvaluatorSettings):
    protocol = "rule"
    evaluator = "judgelab.evaluators.rules:FormatEvaluator"
    kind: Literal["format"] = "format"


class SyntaxSettings(EvaluatorSettings):
    protocol = "rule"
    evaluator = "judgelab.evaluators.rules:SyntaxEvaluator"
    kind: Literal["syntax"] = "syntax"


# The execution settings' values before `tests: extended` became the default: left out of the
# settings' dump (run ids, cache keys), so the ids of an audit with these values do not move.
LEGACY_TESTS: dict[str, Any] = {"tests": "original", "extended_inputs": 30, "extended_seed": 0}


class ExecutionSettings(EvaluatorSettings):
    protocol = "execution"
    evaluator = "judgelab.evaluators.execution:ExecutionEvaluator"
    kind: Literal["execution"] = "execution"
    timeout_s: float = Field(10.0, gt=0, le=600, description="Wall-clock limit of a run.")
    cpu_s: float = Field(
        10.0, gt=0, le=600,
        description="CPU seconds of each process of a run (the candidate's tree, the tester); "
        "at least timeout_s, since the tester runs under it too.",
    )  # fmt: skip
    memory_mb: int = Field(1024, ge=64, le=65536)
    tests: Literal["original", "extended"] = Field(
        "extended",
        description="extended (the default): the task's own tests, then extra inputs derived "
        "from them by type-aware mutation within the input contracts inferred from them "
        "(evaluators/contracts.py, per-task overrides in evaluators/contract_overrides.py), "
        "whose expected outputs the task's reference computes (evaluators/extended.py): a "
        "candidate that hard-codes the public tests' answers fails. original: the task's own "
        "tests only. docs/SECURITY.md gives the hand-check of the extended verdicts.",
    )
    extended_inputs: int = Field(
        200,
        ge=1,
        le=1000,
        description="Extra inputs per task (tests: extended). The inputs for a smaller count "
        "are the first of a larger one's (same seed).",
    )
    extended_seed: int = Field(0, description="Seed of the extra inputs (tests: extended).")

    @model_validator(mode="after")
    def _cpu_covers_the_deadline(self) -> ExecutionSettings:
        if self.cpu_s < self.timeout_s:
            raise ValueError(
                f"cpu_s ({self.cpu_s:g}) must be >= timeout_s ({self.timeout_s:g}): the "
                "trusted tester runs under cpu_s too, and one stopped before the deadline "
                "leaves a run without a verdict"
            )
        return self

    @model_serializer(mode="wrap")
    def _without_legacy_values(self, handler: Any) -> dict[str, Any]:
        """Each test setting left out where it has the value every audit had before `extended`
        became the default (issue 62), so that an audit that asks for the original tests keeps
        its run ids and caches, while the default's (now extended) are new ones."""
        out = handler(self)
        for name, legacy in LEGACY_TESTS.items():
            if getattr(self, name) == legacy:
                out.pop(name, None)
        return out


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


class RulerSettings(LLMJudgeSettings):
    protocol = "ruler"
    scores_groups = True
    evaluator = "judgelab.evaluators.ruler:RulerJudge"
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

    def in_given_order(self) -> RulerSettings:
        return self.model_copy(update={"shuffle": False})


class RubricSettings(LLMJudgeSettings):
    protocol = "rubric"
    evaluator = "judgelab.evaluators.rubric:RubricJudge"
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


class RewardSettings(EvaluatorSettings):
    """A reward function with TRL's signature, ``(prompts, completions, **kwargs) ->
    list[float | None]``, called once per group (`judgelab.evaluators.reward`)."""

    protocol = "reward"
    evaluator = "judgelab.evaluators.reward:RewardEvaluator"
    kind: Literal["reward"] = "reward"
    function: str = Field(
        pattern=r"^[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?$",
        description="The function: 'package.module:function' (imported when the evaluator is "
        "built, so it works from params.yaml and in every process), or a name given to "
        "`judgelab.register_reward` in this process. It gets the group's prompts and "
        "completions (lists of str) and, as keyword lists, task_id, candidate_id, entry_point "
        "and test; it returns one float or None (unscored) per completion.",
    )
    min_score: float = Field(0.0, description="The reward that maps to 0.")
    max_score: float = Field(1.0, description="The reward that maps to 1.")
    out_of_range: Literal["unscore", "clip"] = Field(
        "unscore",
        description="A reward outside [min_score, max_score]: leave the candidate unscored "
        "(default) or clip it. The raw reward is kept either way.",
    )

    @model_validator(mode="after")
    def _a_range(self) -> RewardSettings:
        if not self.max_score > self.min_score:
            raise ValueError(
                f"max_score ({self.max_score}) must be above min_score ({self.min_score})"
            )
        return self


class PlantedSettings(EvaluatorSettings):
    """A judge whose audit figures are known by construction: the tests' verdict (1 pass, 0
    fail), flipped with probability `flip` per candidate, or shuffled within the group
    (`shuffle`: the placebo). Deterministic (seeded by the candidate), so cached and
    reproducible: the arms of a training-effect study (docs/TRAINING.md)."""

    protocol = "planted"
    evaluator = "judgelab.evaluators.planted:PlantedJudge"
    kind: Literal["planted"] = "planted"
    flip: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Probability that a candidate's test verdict is flipped (pass <-> fail), "
        "decided by a hash of (seed, candidate id): 0 is the tests, 1 their inverse.",
    )
    shuffle: bool = Field(
        False,
        description="The placebo: the group's (possibly flipped) verdicts permuted among its "
        "tested candidates, seeded by the group, so the reward is independent of the code.",
    )
    seed: int = 0
    tests: ExecutionSettings = Field(
        ExecutionSettings(name="execution"),
        description="How the tests run (the execution kind's settings; its name is unused).",
    )


# kind -> its settings model, in the order docs/CONFIG.md lists them
SETTINGS: dict[str, type[EvaluatorSettings]] = {
    "format": FormatSettings,
    "syntax": SyntaxSettings,
    "execution": ExecutionSettings,
    "ruler": RulerSettings,
    "rubric": RubricSettings,
    "reward": RewardSettings,
    "planted": PlantedSettings,
}


# The protocols, the one list of them: the scores table's `protocol` values, those of the LLM
# judges (whose calls can fail), and those that score a whole group at once.
PROTOCOLS: tuple[str, ...] = tuple(dict.fromkeys(cls.protocol for cls in SETTINGS.values()))
JUDGE_PROTOCOLS: tuple[str, ...] = tuple(
    dict.fromkeys(c.protocol for c in SETTINGS.values() if issubclass(c, LLMJudgeSettings))
)
GROUP_PROTOCOLS: tuple[str, ...] = tuple(
    dict.fromkeys(c.protocol for c in SETTINGS.values() if c.scores_groups)
)
TRUTH_PROTOCOL = ExecutionSettings.protocol  # the tests' verdicts: the truth of an audit
# How the tests run where no execution evaluator is configured (the probes' known-truth checks,
# training's pass rate, the contrast groups' command line): the execution kind's defaults.
DEFAULT_EXECUTION = ExecutionSettings(name="execution")


def executions(evaluators: Sequence[EvaluatorSettings]) -> list[ExecutionSettings]:
    """The evaluators that run the tasks' tests: those that can be an audit's truth. The one
    place that asks an evaluator's kind for its role."""
    return [ev for ev in evaluators if isinstance(ev, ExecutionSettings)]


def valid_kinds() -> str:
    return ", ".join(repr(k) for k in SETTINGS)


def parse_spec(value: Any) -> EvaluatorSettings:
    """One `scores.evaluators` entry, validated by its kind's settings model."""
    if isinstance(value, EvaluatorSettings):
        return value
    if not isinstance(value, dict):
        raise PydanticCustomError("evaluator", "an evaluator is a mapping with a name and a kind")
    kind = value.get("kind")
    if kind is None:
        raise PydanticCustomError(
            "evaluator_kind", "no kind given; valid kinds: {valid}", {"valid": valid_kinds()}
        )
    if not isinstance(kind, str) or kind not in SETTINGS:
        raise PydanticCustomError(
            "evaluator_kind",
            "unknown evaluator kind {kind}; valid kinds: {valid}",
            {"kind": repr(kind), "valid": valid_kinds()},
        )
    return SETTINGS[kind].model_validate(value)


# The settings of any registered kind. SerializeAsAny: a dump keeps the kind's own keys.
EvaluatorSpec = SerializeAsAny[Annotated[EvaluatorSettings, PlainValidator(parse_spec)]]
