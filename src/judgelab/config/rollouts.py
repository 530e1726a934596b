"""`rollouts`: how the policy samples candidates, or which candidates are imported."""

from __future__ import annotations

from pydantic import (
    Field,
    model_validator,
)

from judgelab.config.section import Section

# The task prompt of the experiment we reproduce (evaluating-your-evaluators, AutoRL).
EXPERIMENT_SYSTEM_PROMPT = """You are a professional programmer that can write quality code in various languages. You will be provided with the users text that would be a request for a programming task in natural language, Your goal is to generate a code solution to the programming task given, the code response should be structured in the following XML style tags:

<request>: This tag should wrap the user's original natural language request.

<language>: This tag should specify the programming language used in the code solution (e.g., Python, JavaScript, Java).

<code>: This tag should wrap the generated code block. The code should be well-commented.

For example, if the user's text is "write a python function that calculates the factorial of a number", the output should be:

<request>write a python function that calculates the factorial of a number</request>
<language>Python</language>
<code>
def factorial(n):
   if n < 0:
       raise ValueError("Factorial is not defined for negative numbers.")
   elif n == 0 or n == 1:
       return 1
   else:
       result = 1
       for i in range(2, n + 1):
           result *= i
       return result
</code>"""


class RolloutSettings(Section):
    policy: str = Field(
        "qwen-0.5b", description="The model that writes the candidates (one writer)."
    )
    policies: list[str] | None = Field(
        None,
        min_length=1,
        description="Several writers in place of `policy`: each writes k candidates per task "
        "and a task's group is all of them, writer by writer in this order (k x writers <= "
        "64). Every candidate names its writer (the rollouts table's `policy`).",
    )
    k: int = Field(
        4,
        ge=1,
        le=64,
        description="Candidates per task: the group a group judge (RULER) ranks in one call. "
        "Training draws its own groups (`train.k`).",
    )
    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(384, ge=16, le=8192)
    seed: int = 0
    system_prompt: str = EXPERIMENT_SYSTEM_PROMPT
    candidates: str | None = Field(
        None,
        min_length=1,
        description="Your own candidates (JSONL or parquet under inputs/, relative to the "
        "project root) in place of sampling the policy; k, temperature and seed then do not "
        "apply. Format: docs/TASKS.md.",
    )
    extra_candidates: str | None = Field(
        None,
        min_length=1,
        description="A candidates file (the `candidates` format) whose candidates join the "
        "sampled groups, each task's after its writers' samples: contrast groups beside "
        "natural rollouts, for instance. Not with `candidates`.",
    )

    @model_validator(mode="after")
    def _one_list_of_writers(self) -> RolloutSettings:
        if self.candidates is not None and self.extra_candidates is not None:
            raise ValueError(
                "candidates replaces sampling and extra_candidates joins it: set one of them"
            )
        if self.policies is None:
            return self
        if "policy" in self.model_fields_set:
            raise ValueError("set policy (one writer) or policies (several), not both")
        if len(set(self.policies)) != len(self.policies):
            raise ValueError(f"policies: a writer is listed twice ({self.policies})")
        if self.k * len(self.policies) > 64:
            raise ValueError(
                f"k x policies = {self.k} x {len(self.policies)}: a task's group holds at most "
                "64 candidates"
            )
        return self

    @property
    def writers(self) -> list[str]:
        """The models that write the candidates, in the order their groups are built."""
        return list(self.policies) if self.policies is not None else [self.policy]
