"""Parse a policy answer in the experiment's format: <request>, <language>, <code> tags."""

from __future__ import annotations

import re
from dataclasses import dataclass

_TAG = {
    name: re.compile(rf"<{name}>(.*?)</{name}>", re.DOTALL)
    for name in ("request", "language", "code")
}
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class ParsedAnswer:
    request: str | None
    language: str | None
    code: str | None
    code_source: str  # "tag", "unclosed" (a <code> never closed), "fence" or "none"


def _strip_fences(code: str) -> str:
    """Models often put a Markdown fence inside <code>; keep only what is inside it."""
    m = _FENCE.search(code)
    return m.group(2) if m else code


def parse_answer(text: str) -> ParsedAnswer:
    found = {name: (m.group(1) if (m := rx.search(text)) else None) for name, rx in _TAG.items()}
    for name in ("request", "language"):
        found[name] = found[name].strip() if found[name] is not None else None
    code, source = found["code"], "tag"
    if code is None and (start := text.find("<code>")) != -1:
        # Truncated (max_tokens) or never closed: the code runs to the end of the answer.
        code, source = re.sub(r"\n?```\s*$", "", text[start + len("<code>") :]), "unclosed"
    if code is not None:
        # Only newlines: a completion-style body keeps its first line's indentation.
        code = _strip_fences(code).strip("\n")
        code = code if code.strip() else None
    else:
        fences = _FENCE.findall(text)
        python = [body for lang, body in fences if lang.lower() in ("python", "py", "python3", "")]
        if python:
            code, source = python[0].strip("\n"), "fence"
        else:
            source = "none"
    return ParsedAnswer(
        found["request"], found["language"], code or None, source if code else "none"
    )
