"""`train`: GRPO with LoRA, one policy per judge, and its held-out evaluation."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from judgelab.config.section import Section


class LoraSettings(Section):
    r: int = Field(8, ge=1, le=256)
    alpha: int = Field(16, ge=1, le=1024)
    dropout: float = Field(0.0, ge=0, lt=1)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"], min_length=1
    )


class LossSettings(Section):
    """ART's loss (`art.loss.loss_fn`) options; None keeps ART's default."""

    ppo: bool = Field(
        False,
        description="True: PPO's clipped surrogate. False: ART's default, the clipped "
        "importance-weight policy gradient (CISPO).",
    )
    epsilon: float | None = Field(None, gt=0, le=10)
    epsilon_high: float | None = Field(None, gt=0, le=10)


class HeldOutSettings(Section):
    """Tasks with tests the policy never trains on, measured with the tests every epoch.

    The pool is HumanEval[offset : offset + pool], or the tasks named in `ids` (any task
    source: HumanEval, CodeI/O, your files). A held-out task that the base policy always
    passes (or always fails) cannot show a judge's effect, so by default (`select: mixed`)
    they are chosen where it does neither: before the first epoch the base policy draws
    `samples` completions at `temperature` for each task of the pool; the first `limit`
    tasks (in pool order) whose pass rate is strictly between 0 and 1 are held out, filled
    up with the pool's tasks closest to a 0.5 pass rate when too few qualify. These draws
    only choose: epoch 0 measures the chosen tasks on draws of their own, so the baseline of
    a task chosen for a pass rate of 1/2 is not 1/2 by construction (no regression to the
    mean in the gain). The choice is written to data/training/heldout.json and kept for
    every epoch and judge.
    `select: fixed` holds out the pool's first `limit` tasks as they are.
    """

    select: Literal["mixed", "fixed"] = Field(
        "mixed", description="mixed: where the base policy is neither always right nor always "
        "wrong (see above); fixed: the pool's first `limit` tasks."
    )  # fmt: skip
    offset: int = Field(2, ge=0, le=163)
    pool: int = Field(8, ge=1, le=164, description="Tasks screened by `select: mixed`.")
    limit: int = Field(4, ge=1, le=164, description="Held-out tasks kept.")
    ids: list[str] = Field(
        default_factory=list,
        description="The pool by task id, from any task source (HumanEval/<n>, "
        "codeio-hq/<n>, codeio/<n>, a task_id of tasks.files), each built by its source with "
        "its tasks.<source> settings, in this order; overrides offset and pool. Empty: "
        "HumanEval[offset : offset + pool].",
    )
    samples: int = Field(2, ge=1, le=64, description="Samples per task, fixed seeds.")
    temperature: float = Field(1.0, ge=0, le=2, description="0: greedy decoding.")
    max_tokens: int = Field(256, ge=16, le=4096)
    seed: int = Field(0, description="Seeds the held-out rows' draws (at temperature > 0).")

    @model_validator(mode="after")
    def _mixed_can_be_mixed(self) -> HeldOutSettings:
        if self.select == "mixed" and (self.samples < 2 or self.temperature <= 0):
            raise ValueError(
                "select: mixed needs samples >= 2 and temperature > 0 (one greedy sample "
                "always passes or always fails); or use select: fixed"
            )
        if self.select == "mixed" and self.limit > self.pool and not self.ids:
            raise ValueError(f"limit ({self.limit}) must not exceed pool ({self.pool})")
        if self.ids and self.limit > len(self.ids):
            raise ValueError(f"limit ({self.limit}) must not exceed the {len(self.ids)} ids")
        if len(set(self.ids)) != len(self.ids):
            raise ValueError(f"ids: a task is listed twice ({self.ids})")
        return self


class TrainSettings(Section):
    renamed = {"judges": "rewards"}
    removed = {"min_ci_groups": "the training stage uses analysis.min_ci_groups"}

    rewards: list[str] = Field(
        default_factory=list,
        description="The evaluators (names from scores.evaluators) whose scores are the "
        "rewards: one policy trained on each.",
    )
    backend: Literal["torch", "art"] = Field(
        "torch",
        description="torch: LoRA GRPO on CPU or CUDA. art: ART's LocalBackend (NVIDIA GPU), "
        "not wired into the epoch loop yet: the training stage refuses it with the reason.",
    )
    policy: str = Field(
        "qwen-0.5b", description="An embedded model: its GGUF is loaded into transformers."
    )
    device: Literal["auto", "cpu", "cuda"] = "auto"
    dtype: Literal["auto", "bfloat16", "float32"] = Field(
        "auto",
        description="Base weights' dtype (the LoRA weights and optimiser stay float32). "
        "auto: bfloat16 on CUDA and on CPUs with native bfloat16 (AVX-512 BF16 or AMX), "
        "float32 elsewhere (on an AVX2-only CPU bfloat16 training is > 8x slower). "
        "`judgelab doctor` shows the choice.",
    )
    gradient_checkpointing: bool = Field(
        True,
        description="Recompute each layer's activations in the backward instead of keeping "
        "them: a GRPO step holds one layer's activations, not every layer's (about 2 GB less "
        "for Qwen2.5-Coder-0.5B at 4 x 256 tokens), for about a third more step time "
        "(bench/training_memory.py). Sampling and log-probabilities without gradient are "
        "unaffected.",
    )
    sampler: Literal["llama.cpp", "torch"] = Field(
        "llama.cpp",
        description="What draws the policy's samples: llama.cpp (the policy's GGUF with the "
        "current LoRA adapter, converted after each step; the step trains on the token ids "
        "llama.cpp drew, its behaviour log-probabilities the torch policy's) or torch (the "
        "trained model's own batched decode; docs/BENCHMARKS.md compares them).",
    )
    epochs: int = Field(3, ge=1, le=1000)
    groups_per_epoch: int = Field(
        1, ge=1, le=1000, description="Training tasks per epoch (cycled)."
    )
    select: Literal["mixed", "all"] = Field(
        "mixed",
        description="Which tasks the training groups come from. mixed: as the held-out tasks "
        "are chosen, from the base policy's own draws: its train.k epoch-0 samples of each "
        "training task (outside the held-out pool), tested; the first epochs x "
        "groups_per_epoch tasks whose pass rate is strictly between 0 and 1 are trained on "
        "(cycled), filled up with those closest to 0.5 when too few are; epoch 0 trains on "
        "those very draws. all: every task with tests, in the tasks table's order.",
    )
    screen: int = Field(
        8,
        ge=1,
        le=1000,
        description="select: mixed screens at most this many training tasks per group it "
        "needs (epochs x groups_per_epoch).",
    )
    k: int = Field(4, ge=2, le=64, description="Rollouts per task in one GRPO group.")
    temperature: float = Field(1.0, gt=0, le=2)
    max_tokens: int = Field(192, ge=16, le=4096)
    learning_rate: float = Field(5e-5, gt=0, le=1)
    max_grad_norm: float = Field(1.0, gt=0)
    lora: LoraSettings = LoraSettings()
    loss: LossSettings = LossSettings()
    heldout: HeldOutSettings = HeldOutSettings()
    hacking_margin: float = Field(
        0.1,
        gt=0,
        le=1,
        description="Descriptive only (the history's `reward_pass_divergence`, not the "
        "alarm): an epoch whose mean reward rose by at least this much while the test pass "
        "rate of the same training samples fell by at least this much. With the policy held "
        "fixed it marks epochs by chance (docs/TRAINING.md gives the measured rate).",
    )
    alarm_alpha: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="The reward-hacking alarm's false-alarm bound, its one alpha (the "
        "training history raises it, the analysis reports it): it fires when the run's "
        "e-detector of within-group anti-alignment (GRPO pushing towards failing code, from "
        "the start or from any later epoch) reaches 1 / alarm_alpha; a judge blind to the "
        "tests sets it off in a whole run with probability at most alarm_alpha "
        "(docs/TRAINING.md).",
    )
    seed: int = Field(
        0,
        description="The training seed (the LoRA initialisation and the training samples' "
        "draws) when `seeds` is empty.",
    )
    seeds: list[int] = Field(
        default_factory=list,
        max_length=16,
        description="Training seeds: each judge is trained once per seed, all policies in "
        "lockstep, each under data/training/<judge>/seed-<s>/; the held-out tasks are the "
        "same for every seed, their draws each seed's own. Empty: `seed` alone, under "
        "data/training/<judge>/.",
    )

    @model_validator(mode="after")
    def _distinct_seeds(self) -> TrainSettings:
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds: a seed is listed twice ({self.seeds})")
        return self


class StudySettings(Section):
    """The training-effect study's settings (`judgelab study`, docs/TRAINING.md "Does the
    audit predict training?"). Not a params.yaml section: the study is run on demand, its
    options given on the command line; the GRPO settings (learning rate, k, temperature,
    LoRA, loss) are `train.*`'s."""

    arms: list[str] = Field(
        default_factory=list,
        description="Evaluators (names in scores.evaluators) trained on as arms, beside the "
        "planted ones.",
    )
    flips: list[float] = Field(
        default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0],
        description="Planted arms: the tests' verdicts flipped at each of these rates.",
    )
    placebo: bool = Field(
        True, description="A placebo arm: the tests' rewards shuffled within each group."
    )
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    method: Literal["first-order", "steps"] = Field(
        "first-order",
        description="How an arm's effect is measured: `first-order`, the bank's change under "
        "one plain-SGD GRPO step to first order, for every arm from one pass over the samples "
        "(`training.first_order`); `steps`, `steps` actual AdamW GRPO steps per arm.",
    )
    fd_step: float = Field(
        0.01,
        gt=0,
        description="The central difference's distance along the bank's unit gradient in the "
        "LoRA parameters (`training.first_order.directional_slopes`, a step of the size one "
        "training step takes). The study's slopes are exact (autograd, per bank task) since "
        "2026-11-28; studies before took them by central differences at this distance.",
    )
    steps: int = Field(
        2,
        ge=1,
        le=100,
        description="GRPO steps per (arm, seed), each on the seed's same groups (drawn once "
        "from the base policy).",
    )
    groups: int = Field(
        4,
        ge=1,
        le=1000,
        description="Training groups per seed: the first `groups` training tasks, k samples each.",
    )
    bank_ids: list[str] = Field(
        default_factory=list,
        description="The bank's tasks (never trained on); empty: train.heldout's pool.",
    )
    bank_samples: int = Field(8, ge=2, le=256, description="Base-policy samples per bank task.")
    rollouts: str | None = Field(
        None,
        description="An audit's rollouts table (a path from the project root): the study "
        "trains on its policy samples, the groups the audit's judges scored, instead of "
        "drawing its own; seed i takes the i-th block of `groups` tasks. None: drawn from "
        "train.policy.",
    )
    bank_size: int = Field(
        8,
        ge=1,
        le=1000,
        description="With `rollouts` and no bank_ids: the bank is the first bank_size tasks "
        "after the training blocks whose samples both pass and fail.",
    )
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
