"""Typed errors. Each says where a failure happened and whether retrying can help."""

from __future__ import annotations


class JudgelabError(Exception):
    """Base class for every error judgelab raises on purpose."""


class ConfigError(JudgelabError):
    """params.yaml (or a model registry entry) is invalid. Never retryable."""


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
