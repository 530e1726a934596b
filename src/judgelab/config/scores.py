"""`scores`: the evaluators (each kind's settings: `judgelab.config.evaluators`), how
often judges repeat, and the failure budget."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from judgelab.config.evaluators import EvaluatorSpec
from judgelab.config.section import Section


class ScoresSettings(Section):
    repeats: int = Field(1, ge=1, le=20)
    populations: Literal["apart", "together"] = Field(
        "apart",
        description="apart: each task's natural candidates (the policy's samples, or imported "
        "ones) are judged in a call of their own, as GRPO judges them, and its known-truth "
        "contrast group (reference, mutants, non-answer: rollouts.extra_candidates) in "
        "another. together: both in one call; a group judge (RULER) then sees the reference "
        "beside the policy's code, so the natural candidates' figures are reference-guided. "
        "A pointwise judge scores one candidate at a time either way.",
    )
    evaluators: list[EvaluatorSpec]
    max_failure_share: float = Field(
        0.1,
        gt=0,
        le=1,
        description="The scores stage (and `judgelab audit`) writes its table and report, then "
        "exits 4 naming the judge, when more than this share of a judge's calls failed, "
        "whatever their causes (timeouts, HTTP errors, unparseable replies after every retry), "
        "or the judge scored none of its candidates. A score out of range is no failed call "
        "(analysis.reject.max_unscored weighs it). 0.1: analysis.reject.max_unscored's share. "
        "Never part of a run id.",
    )

    @model_validator(mode="after")
    def _unique_names(self) -> ScoresSettings:
        seen: set[str] = set()
        for ev in self.evaluators:
            if ev.name in seen:
                raise ValueError(f"evaluator name {ev.name!r} is used twice")
            seen.add(ev.name)
        return self
