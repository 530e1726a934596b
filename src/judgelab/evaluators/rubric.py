"""Pointwise rubric judge: one candidate per call, graded by a code-review rubric.

`RubricJudge` judges each candidate of a group in a call of its own, up to the endpoint's
concurrency at once, and returns one `Verdict` per candidate. The judge sees the task request
and the candidate's answer, is told to decide correctness first and quality second, and
replies with
``{"explanation": str, "score": number in [0, 1]}`` (`RubricReply`). The request goes through
``litellm.acompletion(model="judgelab/<endpoint>", response_format=RubricReply)``, so through
the same provider, cache and schema adaptation as RULER; retries, the request seed, call
records, the out-of-range reward policy and unscored failures are those of every LLM judge
(`judgelab.evaluators.llm_judge`).
"""

from __future__ import annotations

from textwrap import dedent
from typing import Any

import litellm
from pydantic import BaseModel, Field

from judgelab.config.evaluators import RubricSettings
from judgelab.errors import JudgeReplyError
from judgelab.evaluators.llm_judge import LLMJudge, ReplyShape, Score
from judgelab.evaluators.transport.provider import CallRecord
from judgelab.verdicts import Candidate, Task


class RubricReply(BaseModel):
    """The reply the rubric judge must give. Explanation first: the model reasons, then scores."""

    explanation: str = Field(description="The decisive reasons for the score, briefly.")
    score: float = Field(description="A score between 0 and 1.")


SYSTEM_PROMPT = (
    "You are a strict senior software engineer reviewing a candidate answer to a programming "
    "request. You judge correctness first and quality second, and you reply only with JSON."
)

ANSWER_TEMPLATE = dedent(
    """\
    <request>
    {request}
    </request>

    <answer>
    {answer}
    </answer>

    """
)

# The part of the prompt users tune (`rubric:` on a rubric evaluator replaces it).
DEFAULT_RUBRIC = dedent(
    """\
    Grade the answer to the request with this rubric, in order:
    1. Correctness (decides most of the score): does the code do what the request asks,
       including the edge cases the request implies? Would it run as written: valid syntax,
       every name defined or imported, no obvious runtime error?
    2. Quality (only once it is correct): clear structure and names, useful comments,
       no needless complexity.

    Scores:
    - 0.0: no code, unrelated code, or code that cannot run.
    - 0.1 to 0.3: attempts the request but is wrong or would fail when run.
    - 0.4 to 0.6: runs, but misses required behaviour or important edge cases.
    - 0.7 to 0.9: correct, with minor quality problems.
    - 1.0: correct, runs, and is clean.
    An answer that would not run or does not solve the request scores at most 0.3, however
    polished it looks. Do not reward length, keywords or features the request did not ask for.

    """
)

REPLY_TEMPLATE = dedent(
    """\
    Reply with JSON only: {{"explanation": "<at most {max_chars} characters: the decisive
    reasons>", "score": <a number from 0 to 1>}}"""
)


def rubric_messages(
    task: Task, candidate: Candidate, max_chars: int, rubric: str | None = None
) -> list[dict[str, str]]:
    """The judge prompt for one candidate (system + user): the request and answer, the rubric
    (`DEFAULT_RUBRIC` unless given; taken as written, braces and all), the reply format."""
    answer = ANSWER_TEMPLATE.format(
        request=task.prompt.strip(), answer=candidate.completion.strip()
    )
    grading = DEFAULT_RUBRIC if rubric is None else rubric.strip() + "\n\n"
    user = answer + grading + REPLY_TEMPLATE.format(max_chars=max_chars)
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


class RubricJudge(LLMJudge):
    """Pointwise judge: one call per candidate, ``protocol = "rubric"``."""

    protocol = RubricSettings.protocol
    group = False
    spec: RubricSettings

    def _reply_shape(self, shown: list[Candidate]) -> ReplyShape:
        return ReplyShape(1)

    async def _ask(
        self, task: Task, shown: list[Candidate], sampling: dict[str, Any], record: CallRecord
    ) -> list[Score]:
        (candidate,) = shown
        max_chars = self.spec.call.explanation_max_chars
        response = await litellm.acompletion(
            model=self.litellm_model,
            messages=rubric_messages(task, candidate, max_chars, self.spec.rubric),
            response_format=RubricReply,
            caching=False,
            **sampling,
        )
        content = response.choices[0].message.content or ""
        if not content.strip():
            raise JudgeReplyError("empty reply", raw=record.raw)
        reply = RubricReply.model_validate_json(content)
        return [Score(reply.score, reply.explanation)]
