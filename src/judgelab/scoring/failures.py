"""Judges whose calls failed: what the scores stage says before it exits (the report's first
section, `judgelab.report.failures`, lists them too).

`call_failures(scores, max_share)` reads a scores table and returns one `JudgeFailures` per
LLM judge (protocol ``ruler`` or ``rubric``). A *call* is one judge request as the stage made
it: a RULER group ``(task, repeat)``, or a rubric candidate ``(candidate, repeat)``. A call
*failed* when its rows are unscored with a reason starting ``judge call failed`` or ``judge
reply error`` (every retry spent; `judgelab.evaluators.llm_judge.failure_reason`); its
*cause* is that reason without the ``after N attempts:`` prefix, kept verbatim (an HTTP
status and the server's message, a schema mismatch, a timeout). A judge is *loud* when it
scored none of its candidates, or when more than ``max_share`` of its calls failed, whatever
their causes (two calls of seven timed out, one was refused: 3/7 failed). A score out of range
is no failed call: the judge answered, and the analysis weighs it
(`analysis.reject.max_unscored`). `JudgeFailures.line` is the one line printed per loud judge:
failed calls of all calls, the commonest cause verbatim (its whitespace folded onto one line),
and the setting that fixes it when one exists (`fix_for`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import polars as pl

from judgelab.config import ScoresSettings
from judgelab.config.evaluators import JUDGE_PROTOCOLS
from judgelab.errors import JUDGE_CALL_FAILED, JUDGE_REPLY_ERROR, ModelError

DEFAULT_MAX_FAILURE_SHARE: float = ScoresSettings.model_fields["max_failure_share"].default
_ATTEMPTS = re.compile(r"^(?P<kind>.+?) after \d+ attempts?: ")


class JudgeCallsFailed(ModelError):
    """Raised by the scores stage, after it wrote its table, when a judge is loud: a judge
    that could not be used (exit code `EXIT_UNAVAILABLE`)."""


@dataclass(frozen=True)
class JudgeFailures:
    evaluator: str
    judge: str | None  # the judge model's registry name
    calls: int
    failed: int  # calls that failed (every retry spent)
    candidates: int  # scores-table rows
    scored: int
    cause: str | None  # the commonest cause of a failed call, verbatim
    cause_calls: int  # calls that failed with it
    loud: bool
    unscored_reason: str | None = None  # the commonest reason of an unscored row, verbatim
    max_share: float | None = None  # scores.max_failure_share it was held to

    @property
    def fix(self) -> str | None:
        return fix_for(self.cause, self.judge, self.evaluator) if self.cause else None

    def line(self) -> str:
        """One line: the judge, failed calls of all, the commonest cause, the fix."""
        head = (
            f"{self.evaluator}: {self.failed} of {self.calls} judge calls failed, "
            f"{self.scored} of {self.candidates} candidates scored"
        )
        if self.loud and self.scored and self.max_share is not None:
            head += f" (failed share over scores.max_failure_share = {self.max_share:g})"
        if self.cause is None:
            if self.unscored_reason is None:
                return head + "; no call failed"
            reason = " ".join(self.unscored_reason.split())
            return f"{head}; no call failed; commonest reason left unscored: {reason}"
        cause = " ".join(self.cause.split())  # verbatim, on one line
        out = f"{head}; commonest cause ({self.cause_calls} calls): {cause}"
        fix = self.fix
        return out + (f"; fix: {fix}" if fix else "")


def cause_of(reason: str) -> str | None:
    """A failed call's cause (the reason without ``after N attempts:``), or None when the row
    is no failed call (scored, out of range, no tests)."""
    if not reason.startswith((JUDGE_CALL_FAILED, JUDGE_REPLY_ERROR)):
        return None
    match = _ATTEMPTS.match(reason)
    return reason[match.end() :] if match else reason


def fix_for(cause: str, judge: str | None, evaluator: str) -> str | None:  # noqa: ARG001
    """The setting that fixes a cause, when one does (None: the cause is the judge's own)."""
    model = f"models.{judge}" if judge else "the judge's model"
    low = cause.lower()
    formatish = any(w in low for w in ("response_format", "json_schema", "schema", "grammar"))
    status = re.search(r"http (\d{3})", low)
    code = int(status.group(1)) if status else None
    if code is not None and code != 429 and formatish:
        return (
            f"{model}.structured_output: json_object (llama-cpp-python) or text "
            "(or auto, the default, to detect it)"
        )
    if code in (401, 403):
        return f"{model}.api_key_env (the variable holding a valid key)"
    if code == 404:
        return f"{model}.base_url and {model}.model (the endpoint has no such model or path)"
    if code == 429:
        return f"{model}.max_concurrency or requests_per_minute (stay inside the rate limit)"
    if "timed out" in low:
        return f"{model}.timeout_s (or a smaller {model}.max_concurrency)"
    if "connection failed" in low:
        return f"{model}.base_url (is the server running and reachable?)"
    if low.startswith("invalid json or schema mismatch") or "trajectory_id" in low:
        return (
            f"{model}.structured_output (json_schema or json_object constrain the reply; "
            "text does not)"
        )
    return None


def _call_key(protocol: str) -> list[str]:
    return ["task_id", "repeat"] if protocol == "ruler" else ["candidate_id", "repeat"]


def call_failures(scores: pl.DataFrame, max_share: float) -> list[JudgeFailures]:
    """One `JudgeFailures` per LLM judge in ``scores``, in evaluator order (module docstring)."""
    judged = scores.filter(pl.col("protocol").is_in(JUDGE_PROTOCOLS))
    out = []
    for name in sorted(judged["evaluator"].unique().to_list()):
        rows = judged.filter(pl.col("evaluator") == name)
        protocol = rows["protocol"][0]
        calls = rows.group_by(_call_key(protocol), maintain_order=True).agg(
            pl.col("reason").drop_nulls().first().alias("reason"),
            (pl.col("status") == "scored").any().alias("any_scored"),
        )
        causes: Counter[str] = Counter()
        for reason, any_scored in calls.select("reason", "any_scored").iter_rows():
            cause = None if any_scored or reason is None else cause_of(reason)
            if cause is not None:
                causes[cause] += 1
        failed = sum(causes.values())
        cause, cause_calls = causes.most_common(1)[0] if causes else (None, 0)
        scored = int((rows["status"] == "scored").sum())
        unscored = rows.filter(pl.col("status") == "unscored")["reason"].drop_nulls()
        common = unscored.value_counts(sort=True) if unscored.len() else None
        judge = rows["judge"].drop_nulls()
        loud = (rows.height > 0 and scored == 0) or (
            calls.height > 0 and failed / calls.height > max_share
        )
        out.append(
            JudgeFailures(
                evaluator=name,
                judge=judge[0] if judge.len() else None,
                calls=calls.height,
                failed=failed,
                candidates=rows.height,
                scored=scored,
                cause=cause,
                cause_calls=cause_calls,
                loud=loud,
                unscored_reason=None if common is None else common["reason"][0],
                max_share=max_share,
            )
        )
    return out


def loud_failures(scores: pl.DataFrame, max_share: float) -> list[JudgeFailures]:
    return [f for f in call_failures(scores, max_share) if f.loud]


def failure_message(loud: list[JudgeFailures], where: str) -> str:
    """The error the scores stage raises: one line per loud judge, after what was written."""
    lines = [f"{len(loud)} judge(s) failed; the scores table was written to {where}:"]
    lines += [f"  {f.line()}" for f in loud]
    return "\n".join(lines)
