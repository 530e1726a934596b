"""Typed errors. Each says where a failure happened and whether retrying can help."""

from __future__ import annotations


class JudgelabError(Exception):
    """Base class for every error judgelab raises on purpose."""


class ConfigError(JudgelabError):
    """params.yaml (or a model registry entry) is invalid. Never retryable."""


class MissingExtraError(JudgelabError):
    """The params ask for what this install lacks: an optional extra (training, the embedded
    models, Dask). Names the extra to install (`judgelab.extras`). Never retryable."""


class TableError(JudgelabError):
    """A table crossing a stage boundary failed validation. Names column and row."""


class ModelError(JudgelabError):
    """A model could not be assembled, verified, served or reached."""


class JudgeRequestError(ModelError):
    """A judge endpoint rejected the request (4xx other than 429/408/409/425). Not retryable."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class TransientError(JudgelabError):
    """A failure that a retry may fix (timeouts, 429, 5xx, malformed replies)."""


class RateLimitedError(TransientError):
    """HTTP 429. `retry_after_s` is the server's Retry-After, when it sent one."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class JudgeReplyError(TransientError):
    """A judge answered, but the reply cannot be turned into scores.

    `raw` keeps the reply text so an unscored row can still show what came back.
    """

    def __init__(self, message: str, raw: str | None = None) -> None:
        super().__init__(message)
        self.raw = raw


# How an unscored row's reason starts when the judge itself failed (its call or its reply),
# as opposed to a verdict on the data (e.g. an out-of-range score): analysis counts these.
JUDGE_CALL_FAILED = "judge call failed"
JUDGE_REPLY_ERROR = "judge reply error"


# What a command's exit code says, the one table of them (docs/OPERATIONS.md, *Exit codes*):
# 1 is anything unexpected (a traceback: a bug to report).
# params.yaml, an input table or file, an API-key variable, a missing extra: fix the input
EXIT_BAD_INPUT = 2
EXIT_GATE = 3  # a gate refused a judge: the attack gate, the audit gate
EXIT_UNAVAILABLE = 4  # a model or judge could not be used: served, reached, or it kept failing
EXIT_CODES = {
    0: "done; every gate asked for passed",
    1: "an unexpected error (a traceback: a bug to report)",
    EXIT_BAD_INPUT: "bad input: params.yaml, an input table or file, an API-key variable, "
    "an extra the command or params need (pipeline, train, embedded, dask) not installed",
    EXIT_GATE: "a gate refused a judge (judgelab probes --fail-above, judgelab gate); "
    "everything was written first",
    EXIT_UNAVAILABLE: "a model or judge could not be used: not served or reached, or a judge "
    "whose calls failed beyond scores.max_failure_share (the table and report are written)",
}


def exit_code(err: JudgelabError) -> int:
    """The exit code a command ends with on `err`."""
    if isinstance(err, ModelError | TransientError):
        return EXIT_UNAVAILABLE
    return EXIT_BAD_INPUT
