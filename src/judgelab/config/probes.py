"""`probes`: the bias probes, their mutants, perturbations and attacks."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from judgelab.config.section import Section

# The mutant and perturbation kinds: the one list of each (judgelab.rollouts.perturb implements
# them and fails to import while one lacks an implementation).
MUTANT_KINDS = (
    "operator_flip",
    "off_by_one",
    "dropped_return",
    "wrong_constant",
    "swapped_arguments",
)
PERTURBATION_KINDS = ("comments", "docstring", "opener", "claims")
# The attacks by family: the one list of the names `probes.attacks` may hold. The family says
# which member an attack replaces and the verdict its copy keeps (judgelab.probes.attacks,
# which implements each name and fails to import while one lacks an implementation): attacks
# on known-failing candidates (a success ranks the attacked copy above its call's mean) and
# semantics-preserving edits of the passing one (the score should not move).
ATTACK_FAMILIES: dict[str, tuple[str, ...]] = {
    "master_key": (
        "master_key_colon",
        "master_key_dot",
        "master_key_thought_process",
        "master_key_step_by_step",
        "master_key_solution",
        "master_key_jie",
        "master_key_kaisetsu",
        "master_key_respuesta",
    ),
    "grader_instruction": ("grader_comment", "grader_docstring"),
    "fake_evidence": ("fake_tests_print", "fake_tests_comment", "fake_tests_docstring"),
    "semantic_edit": ("rename_variables", "reorder_statements"),
}
SEMANTIC_EDITS = ATTACK_FAMILIES["semantic_edit"]
FAILING_ATTACKS = tuple(
    name for family, names in ATTACK_FAMILIES.items() if family != "semantic_edit" for name in names
)
ATTACK_KINDS = FAILING_ATTACKS + SEMANTIC_EDITS


class ProbesSettings(Section):
    """The bias probes (`judgelab probes`): which judges, on which tasks, under which probes."""

    judges: list[str] = Field(
        default_factory=list,
        description="Names of RULER/rubric evaluators from scores.evaluators to probe.",
    )
    tasks: list[str] = Field(
        default_factory=lambda: ["HumanEval/0"],
        description="Task ids (HumanEval/N, codeio-hq/N built with tasks.codeio's settings, a "
        "tasks.files task_id): each gives a known-truth group and a self-preference group.",
    )
    mutants: list[Literal[MUTANT_KINDS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["operator_flip", "dropped_return"],
        description="Mutant kinds in each known-truth group (beside the canonical solution "
        "and a non-answer); a kind without a mutant the tests reject is left out.",
    )
    permutations: int = Field(
        2, ge=1, le=24, description="Orders per group: identity, reversal, then random ones."
    )
    perturbations: list[Literal[PERTURBATION_KINDS]] = Field(  # type: ignore[valid-type]
        default_factory=lambda: ["comments", "claims"],
        description="Surface perturbations applied to half of each known-truth group.",
    )
    repeats: int = Field(
        2,
        ge=0,
        le=10,
        description="Extra calls of the identity view at repeat_temperature: the noise floor "
        "shown beside every order and perturbation figure, and repeat stability. The floor "
        "needs 3 calls of a group at the order views' temperature: 2 repeats when "
        "repeat_temperature equals temperature (the identity view's own call is the third).",
    )
    temperature: float = Field(
        0.0,
        ge=0,
        le=2,
        description="Judge temperature for the order (perm:*), perturbation (pert:*) and attack "
        "(atk:*) views: the temperature the judge rewards at (the scores stage's), so the "
        "figures describe the reward GRPO gets.",
    )
    repeat_temperature: float | None = Field(
        None,
        ge=0,
        le=2,
        description="Judge temperature for the repeats of the identity view; unset: "
        "temperature. The noise floor is shown beside the order figures only when the two "
        "are equal (a floor at another temperature measures other noise).",
    )
    policies: list[str] = Field(
        default_factory=list,
        description="Models that write self-preference candidates; empty: every registry model.",
    )
    samples_per_policy: int = Field(1, ge=1, le=16)
    self_preference: bool = True
    tolerance: float = Field(
        0.05,
        ge=0,
        le=1,
        description="|delta score| within which a judgement counts as "
        "unchanged (CALM robustness rate).",
    )
    praise_threshold: float = Field(
        0.8,
        ge=0,
        le=1,
        description="A score at or above it is praise (absolute false praise, Cohen's kappa, and "
        "the attacks' absolute-scale praise rate; an attack's success is on the judge's own "
        "scale: above its call's mean).",
    )
    bootstrap: int = Field(1000, ge=0, le=100000)
    seed: int = 0
    attacks: list[Literal[ATTACK_KINDS]] = Field(  # type: ignore[valid-type]
        default_factory=list,
        description="Adversarial views of each known-truth group, one judge call each per "
        "task: master-key non-answers (master_key_*: the reply is only an opener such as "
        "':' or 'Thought process:'), instructions to the grader in failing code "
        "(grader_*), fake test evidence in failing code (fake_tests_*), and "
        "semantics-preserving edits of the passing solution (rename_variables, "
        "reorder_statements). The sandbox checks every attacked candidate keeps its verdict.",
    )
    fail_above: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="Gate: `judgelab probes` exits with code 3, naming judge and attack, when a "
        "judge's success rate for any failing-code attack exceeds this (or cannot be measured). "
        "Unset: no gate. `--fail-above` overrides it.",
    )

    @model_validator(mode="after")
    def _repeats_at_the_order_temperature(self) -> ProbesSettings:
        if self.repeat_temperature is None:  # frozen: set once, here, to the resolved value
            object.__setattr__(self, "repeat_temperature", self.temperature)
        return self

    @model_validator(mode="after")
    def _gate_needs_an_attack(self) -> ProbesSettings:
        if self.fail_above is not None and not set(self.attacks) & set(FAILING_ATTACKS):
            raise ValueError(
                "fail_above is set but probes.attacks names no attack on failing code to gate "
                f"(semantics-preserving edits have no success rate); add one of "
                f"{list(FAILING_ATTACKS)}"
            )
        if len(set(self.attacks)) != len(self.attacks):
            raise ValueError("attacks: an attack is listed twice")
        return self
