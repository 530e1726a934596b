"""How a judge request is fitted to what its endpoint can take.

`adapt_request` returns the messages and ``response_format`` to send in a structured-output
mode (the endpoint's setting, or what `judgelab.evaluators.transport.detect` found for
``auto``): ``"json_schema"`` passes the OpenAI-style format through; ``"json_object"`` sends
``{"type": "json_object", "schema": <schema, $defs inlined>}`` (llama-cpp-python's server
answers HTTP 500 to ``json_schema``); ``"text"`` sends no format and
appends the schema to the last user message (`extract_json_object` then cuts the first
JSON object out of the reply, which is validated like any other). System messages are
merged into the first user message when ``endpoint.system_role`` is False (llama.cpp's
``gemma`` chat format drops them).

`bound_schema` gives every string a ``maxLength`` (ids: `ID_MAX_CHARS`, other strings the
judge's ``explanation_max_chars``) and, when the caller knows it, every array its length:
llama-cpp-python's grammar otherwise lets a string run on to ``max_tokens``. When the caller
knows the ids a reply may name (RULER: ``"1"`` … ``"k"``), id fields get an ``enum`` of them,
and for ``json_object`` and prompt-only endpoints the array becomes a tuple naming them in
order: SmolLM2 otherwise invents ids or names one twice, and each such reply costs a retry.
Scores are deliberately *not* bounded, so out-of-range scores stay visible.
`reply_token_budget` is the output budget the longest bounded reply needs.
"""

from __future__ import annotations

import json
from typing import Any

from judgelab.errors import JudgeRequestError
from judgelab.models.client import merge_system
from judgelab.models.endpoint import Endpoint

ID_MAX_CHARS = 8
DEFAULT_STRING_MAX_CHARS = 300


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace local ``#/$defs/X`` references by their definitions and drop ``$defs``."""
    defs = {**schema.get("definitions", {}), **schema.get("$defs", {})}

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.split("/")[-1] in defs:
                name = ref.split("/")[-1]
                if name in seen:
                    raise JudgeRequestError(f"recursive schema reference {ref!r} cannot be inlined")
                merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
                return resolve(merged, (*seen, name))
            return {
                k: resolve(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")
            }
        if isinstance(node, list):
            return [resolve(v, seen) for v in node]
        return node

    return resolve(schema, ())


# Characters one reply item can take besides its explanation under the bounded schema: keys,
# quotes, separators and optional spaces, an id of ID_MAX_CHARS, and a number of up to 16
# integer, 16 fraction and 16 exponent digits (llama.cpp's JSON-schema grammar).
ITEM_OVERHEAD_CHARS = 128


def reply_token_budget(items: int, string_max_chars: int) -> int:
    """Output tokens for the longest reply a schema bounded by `bound_schema` allows (`items`
    objects, each with one explanation of at most `string_max_chars`), at one token per
    character: a small model can write every character as its own token (Gemma-3 writes
    digits that way, and its zero-filled explanations ran past 512 tokens at k = 4, so the
    reply was cut off and retried). A truncated reply is judgelab's budget failing, not the
    judge."""
    return max(1, items) * (string_max_chars + ITEM_OVERHEAD_CHARS) + 32


def _is_id(prop: str | None) -> bool:
    """Whether a property holds an id (``id`` or ``*_id``): bounded to ID_MAX_CHARS."""
    return prop is not None and (prop == "id" or prop.endswith("_id"))


def bound_schema(
    schema: dict[str, Any],
    string_max_chars: int,
    array_items: int | None = None,
    ids: tuple[str, ...] | None = None,
    ordered: bool = False,
) -> dict[str, Any]:
    """A copy of ``schema`` whose strings have a maxLength (and arrays a length, if given);
    with ``ids``, every id string (a property ``id`` or ``*_id``) is one of them. With
    ``ordered`` too, an array of ``len(ids)`` objects that carry an id becomes a tuple
    (``prefixItems``) whose i-th object names the i-th id: no id twice, none left out."""
    out = _copy(schema)

    def as_tuple(node: dict[str, Any]) -> None:
        item = node.get("items")
        if not ids or array_items != len(ids) or not isinstance(item, dict):
            return
        key = next((p for p in item.get("properties") or {} if _is_id(p)), None)
        if key is None:
            return
        node["prefixItems"] = []
        for i in ids:
            one = _copy(item)
            one["properties"][key]["enum"] = [i]
            node["prefixItems"].append(one)
        del node["items"]  # llama.cpp's converter reads `items` before `prefixItems`

    def visit(node: Any, prop: str | None) -> None:
        if not isinstance(node, dict):
            return
        is_id = _is_id(prop)
        if node.get("type") == "string" and "maxLength" not in node:
            node["maxLength"] = ID_MAX_CHARS if is_id else string_max_chars
        if node.get("type") == "string" and is_id and ids and "enum" not in node:
            node["enum"] = list(ids)
        if node.get("type") == "array" and array_items is not None:
            node.setdefault("minItems", array_items)
            node.setdefault("maxItems", array_items)
        for name, child in (node.get("properties") or {}).items():
            visit(child, name)
        for key in ("$defs", "definitions"):
            for child in (node.get(key) or {}).values():
                visit(child, None)
        visit(node.get("items"), None)
        for key in ("anyOf", "oneOf", "allOf"):
            for child in node.get(key) or []:
                visit(child, prop)
        if ordered and node.get("type") == "array":
            as_tuple(node)

    visit(out, None)
    return out


def _copy(schema: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON schema (JSON through and through): several times faster than
    `copy.deepcopy`, which would be a third of a judge call's CPU in the client."""
    return json.loads(json.dumps(schema))


def _schema_of(response_format: Any) -> dict[str, Any] | None:
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        inner = response_format.get("json_schema") or {}
        schema = inner.get("schema")
        return schema if isinstance(schema, dict) else None
    schema = response_format.get("schema")
    return schema if isinstance(schema, dict) else None


def adapt_request(
    messages: list[dict[str, Any]],
    response_format: Any,
    endpoint: Endpoint,
    string_max_chars: int,
    array_items: int | None = None,
    ids: tuple[str, ...] | None = None,
    mode: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The messages and response_format to send to ``endpoint`` in ``mode`` (default: the
    endpoint's setting; see the module docstring)."""
    mode = mode or endpoint.structured_output
    if mode == "auto":
        raise JudgeRequestError(
            f"judge endpoint {endpoint.name!r}: structured_output 'auto' must be resolved "
            "before a request is built"
        )
    prompt_only = mode == "text"
    sent = [{k: v for k, v in m.items()} for m in messages]
    if not endpoint.system_role:
        sent = merge_system(sent)
    schema = _schema_of(response_format)
    if schema is None:
        if isinstance(response_format, dict) and not prompt_only:
            return sent, dict(response_format)  # e.g. a plain {"type": "json_object"}
        return sent, None
    if mode == "json_schema":
        rf = dict(response_format)  # the schema is replaced, not edited: no deep copy
        bounded = bound_schema(schema, string_max_chars, array_items, ids)
        if rf.get("type") == "json_schema":
            rf["json_schema"] = {**rf["json_schema"], "schema": bounded}
        else:
            rf["schema"] = bounded
        return sent, rf
    # The local grammar takes a tuple of ids in order; hosted json_schema modes may not.
    flat = bound_schema(inline_refs(schema), string_max_chars, array_items, ids, ordered=True)
    if mode == "json_object":
        return sent, {"type": "json_object", "schema": flat}
    instruction = (
        "\n\nReply with one JSON object and nothing else. It must match this JSON schema:\n"
        + json.dumps(flat, ensure_ascii=False)
    )
    for m in reversed(sent):
        if m.get("role") == "user":
            m["content"] = f"{m.get('content') or ''}{instruction}"
            break
    else:
        sent.append({"role": "user", "content": instruction.lstrip()})
    return sent, None


def extract_json_object(text: str) -> str:
    """The first complete JSON object in ``text`` (for prompt-only endpoints), else ``text``."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            _, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return text[start:end]
    return text


def normalize_json(text: str) -> str:
    """Re-serialise JSON that is only invalid for raw control characters inside strings.

    llama-cpp-python's schema grammar lets raw newlines and tabs into JSON strings, which
    strict parsers (pydantic, ART) reject although the judge's answer is intact. Such a reply
    is re-encoded; anything else is returned unchanged (and fails parsing as it should). The
    raw text is kept as it came in the call record.
    """
    try:
        json.loads(text)
        return text
    except json.JSONDecodeError:
        pass
    try:
        return json.dumps(json.loads(text, strict=False), ensure_ascii=False)
    except json.JSONDecodeError:
        return text
