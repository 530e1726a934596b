"""The training-effect study's settings (`judgelab study`, docs/TRAINING.md "Does the audit
predict training?"). Not a params.yaml section: the study is run on demand, its options given
on the command line; the GRPO settings (learning rate, k, temperature, LoRA, loss) are
`train.*`'s."""

from __future__ import annotations

from pydantic import Field

from judgelab.config.section import Section


class StudySettings(Section):
    arms: list[str] = Field(
        default_factory=list,
        description="Evaluators (names in scores.evaluators) trained on as arms, beside the "
        "planted ones.",
    )
    flips: list[float] = Field(
        default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0],
        description="Planted arms: the tests' verdicts flipped at each of these rates.",
    )
    placebo: bool = Field(True, description="A placebo arm: the tests' rewards shuffled "
                          "within each group.")  # fmt: skip
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    steps: int = Field(2, ge=1, le=100, description="GRPO steps per (arm, seed), each on "
                       "the seed's same groups (drawn once from the base policy).")  # fmt: skip
    groups: int = Field(4, ge=1, le=1000, description="Training groups per seed: the first "
                        "`groups` training tasks, k samples each.")  # fmt: skip
    bank_ids: list[str] = Field(
        default_factory=list,
        description="The bank's tasks (never trained on); empty: train.heldout's pool.",
    )
    bank_samples: int = Field(8, ge=2, le=256, description="Base-policy samples per bank task.")
    bank_seed: int = 0
    min_ci_arms: int = Field(
        6,
        ge=3,
        le=1000,
        description="Fewest arms a prediction's CI is drawn from; below it the rank "
        "correlation and the slope are shown with their n and no CI.",
    )
    bootstrap: int = Field(2000, ge=0, le=100000)
    seed: int = 0
