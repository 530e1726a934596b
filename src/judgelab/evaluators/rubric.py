"""Pointwise rubric judge: one candidate per call, graded by a code-review rubric.

`RubricJudge.score_one(task, candidate, repeat)` returns one `Verdict` (`score_group` scores
a group candidate by candidate). The judge sees the task request and the candidate's answer,
is told to decide correctness first and quality second, and replies with
``{"explanation": str, "score": number in [0, 1]}`` (`RubricReply`). The request goes through
``litellm.acompletion(model="judgelab/<endpoint>", response_format=RubricReply)``, so through
the same provider, cache and schema adaptation as RULER; retries, the request seed, the
out-of-range reward policy and unscored failures are those of `judgelab.evaluators.llm_judge`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from textwrap import dedent

import litellm
from pydantic import BaseModel, Field

from judgelab.errors import JudgeReplyError
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.evaluators.llm_judge import (
    JudgeResult,
    LLMJudge,
    classify_failure,
    failure_reason,
    raw_tail,
    request_seed,
    retry_calls,
    score_verdict,
    truncate,
)
from judgelab.evaluators.settings import RubricSettings
from judgelab.evaluators.transport.loop import run_sync
from judgelab.evaluators.transport.provider import CallRecord, call_metadata, judge_call
from judgelab.evaluators.transport.schema import reply_token_budget
from judgelab.verdicts import Candidate, Task, Verdict

log = logging.getLogger(__name__)


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


class RubricJudge(LLMJudge, PointwiseEvaluator):
    """Pointwise judge: one call per candidate, ``protocol = "rubric"``."""

    protocol = "rubric"
    spec: RubricSettings

    @property
    def concurrency(self) -> int:  # type: ignore[override]
        return self.endpoint.concurrency

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        return self.judge(task, candidate, repeat).verdicts[0]

    def judge(self, task: Task, candidate: Candidate, repeat: int = 0) -> JudgeResult:
        """The verdict plus the CallRecord of every attempt.

        ``repeat`` changes the request seed, so a repeat samples the judge again (a cache miss)
        instead of replaying the first answer.
        """
        call = self.spec.call
        records: list[CallRecord] = []
        start = time.perf_counter()

        def attempt_fn(attempt: int) -> Verdict:
            return run_sync(self._attempt(task, candidate, repeat, attempt, records))

        what = f"rubric {self.name} on {candidate.candidate_id} (repeat {repeat})"
        verdict, error, attempts = retry_calls(attempt_fn, call, self._sleep, what)
        latency = time.perf_counter() - start
        if verdict is not None:
            return JudgeResult([replace(verdict, latency_s=latency)], records)
        assert error is not None
        raw = getattr(error, "raw", None) or (records[-1].raw if records else None)
        unscored = Verdict.unscored(
            failure_reason(error, attempts),
            explanation=raw_tail(raw, call.explanation_max_chars),
            latency_s=latency,
        )
        return JudgeResult([unscored], records)

    async def _attempt(
        self,
        task: Task,
        candidate: Candidate,
        repeat: int,
        attempt: int,
        records: list[CallRecord],
    ) -> Verdict:
        call = self.spec.call
        messages = rubric_messages(task, candidate, call.explanation_max_chars, self.spec.rubric)
        with judge_call(
            self.endpoint, self.cache, string_max_chars=call.explanation_max_chars
        ) as record:
            records.append(record)
            try:
                response = await litellm.acompletion(
                    model=self.litellm_model,
                    messages=messages,
                    response_format=RubricReply,
                    caching=False,
                    temperature=call.temperature,
                    max_tokens=call.max_tokens
                    if call.max_tokens is not None
                    else reply_token_budget(1, call.explanation_max_chars),
                    seed=request_seed(call.seed, repeat, attempt),
                    metadata=call_metadata(record),
                )
                content = response.choices[0].message.content or ""
                if not content.strip():
                    raise JudgeReplyError("empty reply", raw=record.raw)
                reply = RubricReply.model_validate_json(content)
            except JudgeReplyError:
                raise
            except Exception as err:  # litellm/pydantic raise many types; classify them all
                raise classify_failure(err, record) from err
        return score_verdict(
            reply.score,
            call.out_of_range,
            explanation=truncate(reply.explanation, call.explanation_max_chars),
            latency_s=0.0,
        )
