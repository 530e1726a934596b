"""`scores`: the evaluators (each kind's settings: `judgelab.config.evaluators`), how
often judges repeat, and the failure budget."""

from __future__ import annotations

from pydantic import (
    Field,
    model_validator,
)

from judgelab.config.evaluators import EvaluatorSpec
from judgelab.config.section import Section


class ScoresSettings(Section):
    repeats: int = Field(1, ge=1, le=20)
    evaluators: list[EvaluatorSpec]
    max_failure_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="The scores stage writes its table, then exits non-zero naming the judge, "
        "when more than this share of a judge's calls failed for one cause (or the judge "
        "scored none of its candidates). Never part of a run id.",
    )

    @model_validator(mode="after")
    def _unique_names(self) -> ScoresSettings:
        seen: set[str] = set()
        for ev in self.evaluators:
            if ev.name in seen:
                raise ValueError(f"evaluator name {ev.name!r} is used twice")
            seen.add(ev.name)
        return self
