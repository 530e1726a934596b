"""AutoRL task generation as in the experiment: the policy writes its own coding requests.

The policy is asked, one request per call with its own seed, for a new programming request
matching a task description. Replies are cleaned, validated (length, no code, one request)
and deduplicated (exact after normalisation, and near-duplicates by similarity). Every call
goes through the completion cache, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import re

from judgelab.cache import JsonCache
from judgelab.config import AutoRLSettings
from judgelab.models.completions import cached_chat
from judgelab.models.endpoint import Endpoint
from judgelab.verdicts import Task

log = logging.getLogger(__name__)

SYSTEM = (
    "You write programming requests that a user would send to a coding assistant. "
    "Reply with exactly one request in plain English, one or two sentences, without code."
)
USER = "Task description: {description}\n\nWrite one new, specific request (#{index})."

MIN_CHARS, MAX_CHARS = 25, 400
NEAR_DUPLICATE = 0.9


def clean_request(text: str) -> str | None:
    """The request in `text`, or None when the reply is not a usable request."""
    text = text.strip().strip('"').strip()
    text = re.sub(r"^(request|task)\s*(#?\d+)?\s*[:.-]\s*", "", text, flags=re.IGNORECASE)
    text = re.sub(r"\s+", " ", text).strip()
    if "```" in text or "def " in text or not (MIN_CHARS <= len(text) <= MAX_CHARS):
        return None
    if not re.search(r"[A-Za-z]{3,}", text):
        return None
    return text


def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]", "", text.lower())


def is_duplicate(text: str, kept: list[str]) -> bool:
    norm = _normal(text)
    return any(
        norm == _normal(k)
        or difflib.SequenceMatcher(None, norm, _normal(k)).ratio() >= NEAR_DUPLICATE
        for k in kept
    )


def generate_autorl(settings: AutoRLSettings, endpoint: Endpoint, cache: JsonCache) -> list[Task]:
    if not settings.enabled or settings.n == 0:
        return []
    kept: list[str] = []
    rejected = 0
    for attempt in range(settings.max_attempts):
        messages = [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": USER.format(description=settings.description, index=attempt + 1),
            },
        ]
        out = cached_chat(
            cache,
            endpoint,
            messages,
            temperature=settings.temperature,
            top_p=1.0,
            max_tokens=settings.max_tokens,
            seed=settings.seed * 100_003 + attempt,
        )
        request = clean_request(out["text"])
        if request is None or is_duplicate(request, kept):
            rejected += 1
            continue
        kept.append(request)
        if len(kept) == settings.n:
            break
    log.info("autorl: kept %d requests, rejected %d replies", len(kept), rejected)
    if len(kept) < settings.n:
        log.warning(
            "autorl: only %d of %d requests after %d attempts",
            len(kept),
            settings.n,
            settings.max_attempts,
        )
    return [
        Task(
            task_id=f"autorl/{hashlib.sha256(r.encode()).hexdigest()[:10]}",
            source="autorl",
            request=r,
            prompt=r,
        )
        for r in kept
    ]
