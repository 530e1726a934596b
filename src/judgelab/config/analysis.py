"""`analysis` (with its `power` section) and `tracking` (MLflow)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from judgelab.advantage import Convention
from judgelab.config.section import Section


class PowerSettings(Section):
    """The power section of the report and `judgelab power`: how many task groups it takes to
    separate two judges on the primary (`analysis.primary`); and the effect a training result
    must be able to detect (docs/TRAINING.md, *Minimum detectable effect*). The difference
    between judges it is computed for is `analysis.margin`."""

    removed = {"margin": "the margin is analysis.margin (the pair verdicts and the tasks a "
               "pair needs use it)"}

    alpha: float = Field(0.05, gt=0, lt=1, description="Two-sided significance level.")
    power: float = Field(0.8, gt=0, lt=1, description="Chance of detecting a true margin.")
    training_effect: float = Field(
        0.15,
        gt=0,
        le=1,
        description="The stated effect of training on a judge: the held-out pass-rate change "
        "a training result must be able to detect (its MDE at alpha and power). A result "
        "whose MDE is above it is reported as unable to decide, whatever its CI.",
    )


class RejectSettings(Section):
    """The rejection rules the decision applies before it names a judge (docs/METRICS.md, "A
    rule for rejecting a judge"): decide them before you look at the results. A judge whose
    primary has no valid CI, or one reaching chance, or that inverts at least as many pairs
    as it gets right, is rejected too."""

    max_flat: float = Field(
        0.5, ge=0, le=1,
        description="Largest share of mixed groups a judge may give one score for all.",
    )  # fmt: skip
    max_unscored: float = Field(
        0.1, ge=0, le=1, description="Largest share of its rows a judge may leave unscored."
    )


class AnalysisSettings(Section):
    primary: Literal[
        "signal_fidelity", "pairwise_accuracy_strict", "advantage_fidelity", "top1_over_chance"
    ] = Field(
        "signal_fidelity",
        description="The endpoint judges are ranked and recommended by, fixed before the data "
        "(docs/METRICS.md, analysis/fidelity.py). signal_fidelity: the correlation of the judge's "
        "GRPO advantages with the tests' over every task, each task weighing the same, an "
        "unscored candidate an advantage of 0, and a task the tests do not split counted in "
        "the denominator by how hard the judge pushes there (1 = the tests' signal, 0 = none "
        "or chance, < 0 = inverted). pairwise_accuracy_strict: the share of (passing, failing) "
        "pairs the passing one wins outright, over pairs (chance is below 0.5 for a judge "
        "that ties). advantage_fidelity: signal_fidelity on mixed tasks only, scored "
        "candidates only. top1_over_chance: best-of-k accuracy minus the passing share.",
    )
    advantage: Convention = Field(
        "std",
        description="The advantage convention of the trainer the judge will feed "
        "(judgelab/advantage.py), which the signal figures follow. std: reward minus the "
        "group mean over the group's std (ART; TRL's default scale_rewards='group'), so any "
        "scoring of an all-pass or all-fail group that is not flat costs as much noise as "
        "[0, 1, 0, 1]. centred: reward minus the group mean (Dr. GRPO, RLOO-like, TRL's "
        "scale_rewards='none' / False), so noise costs by its size. batch: centred, over one "
        "std of all the audit's rewards (TRL's scale_rewards='batch').",
    )
    expected_split_share: float | None = Field(
        None,
        gt=0,
        lt=1,
        description="The share of training groups you expect the tests to split (a passing "
        "and a failing candidate): low for a hard task set or an early policy, high near "
        "50 % pass rates. The report gives each judge's signal fidelity at this share from "
        "its two parts (alignment where the tests split a group, noise where they do not). "
        "Unset: the audit's own share.",
    )
    praise_threshold: float = Field(0.8, ge=0, le=1)
    bins: int = Field(10, ge=2, le=100)
    bootstrap: int = Field(1000, ge=0, le=100000)
    seed: int = 0
    min_ci_groups: int = Field(
        15,
        ge=2,
        le=1000,
        description="Fewest independent groups (tasks, probe groups, held-out tasks) a "
        "CI is drawn from; below it a figure shows its value and n instead. 15: from 15 "
        "mixed groups up the primaries' 95 % CIs cover 90-99 % in the planted-judge "
        "self-test (docs/SELFTEST.md: k = 4 and 8, per-task skill, ties, unscored "
        "candidates; signal fidelity 93-99 %); at 5-10 some cover 79-89 %.",
    )
    margin: float = Field(
        0.05,
        gt=0,
        le=1,
        description="The smallest difference in the primary (analysis.primary) worth acting "
        "on: two judges whose paired difference is shown to lie within it (TOST, Holm over "
        "the pairs) are called equivalent, and an undecided pair is told how many tasks "
        "would decide it at this margin (docs/METRICS.md, 'The margin'). 0.05: a twentieth "
        "of the tests' own signal fidelity, and a quarter to a half of what the reference's "
        "LLM judges reach (0.09-0.19).",
    )
    power: PowerSettings = PowerSettings()
    reject: RejectSettings = RejectSettings()
    truth: str | None = Field(
        None,
        description="The execution evaluator whose verdicts are the truth, by name (another "
        "execution evaluator, e.g. one with tests: extended, is then audited like a judge, "
        "beside it). Unset: the first execution evaluator by name.",
    )
    truth_baseline: str | None = Field(
        None,
        description="An earlier run's execution verdicts, relative to the project root: a "
        "scores table (its execution rows) or a parquet table of candidate_id, score and "
        "outcome. The report says how many of them this run's execution evaluator changed "
        "(analysis/recheck.py). Keep it under inputs/, which the analysis stage depends on.",
    )


class TrackingSettings(Section):
    enabled: bool = True
    experiment: str = "judgelab"
