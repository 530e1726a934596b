"""Every setting's default that README and the docs quote is the settings model's own.

A doc quotes a default in one form, `key` (default `value`), optionally with what the
shipped params.yaml sets: `key` (default `value`; params.yaml `value`). A key is a dotted
path from the top of params.yaml (`train.epochs`) or, for an entry of a list or a mapping
(`scores.evaluators`, `models`), from the entry (`call.out_of_range`, `structured_output`);
a value is YAML. The defaults come from `judgelab.config.Settings` itself, walked through its
fields, never from a copy. A default stated near a key in any other way ("`key` (0 by
default)") is refused, so that every stated default is one this test reads. docs/CONFIG.md is
generated from the same models (test_config_docs.py) and left out here; so is CHANGELOG.md,
which records what was true when each entry was written."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from judgelab.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    p
    for p in [*ROOT.glob("*.md"), *(ROOT / "docs").glob("*.md")]
    if p.name not in ("CONFIG.md", "CHANGELOG.md")
)
QUOTED = re.compile(
    r"`([a-z_][a-z0-9_.]*)`\s+\(default\s+`([^`]*)`(?:;\s+params\.yaml\s+`([^`]*)`)?"
)
KEY = re.compile(r"`([a-z_][a-z0-9_.]*)`")
NEAR = 30  # characters after a key in which "default" is a stated default


def _kinds(model: type[BaseModel]) -> list[type[BaseModel]]:
    """A model and every model derived from it (an evaluator entry is one of its kinds)."""
    return [model, *(k for sub in model.__subclasses__() for k in _kinds(sub))]


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The settings models an annotation holds, through unions and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _kinds(annotation)
    return [m for arg in get_args(annotation) for m in _models(arg)]


def _defaults(model: type[BaseModel], prefix: str, out: dict[str, list[Any]]) -> None:
    for name, field in model.model_fields.items():
        key, inner = prefix + name, _models(field.annotation)
        if get_origin(field.annotation) in (list, dict):  # entries: keys from the entry
            for entry in inner:
                _defaults(entry, "", out)
        elif inner:  # a section: keys under its own
            for section in inner:
                _defaults(section, key + ".", out)
            continue
        default = field.get_default(call_default_factory=True)
        if default is not PydanticUndefined:
            out.setdefault(key, []).append(default)


def settings_defaults() -> dict[str, list[Any]]:
    """Each key's defaults: one per model that has the key (evaluator kinds share `call`)."""
    out: dict[str, list[Any]] = {}
    _defaults(Settings, "", out)
    return out


DEFAULTS = settings_defaults()
PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


def same(quoted: str, actual: Any) -> bool:
    value = yaml.safe_load(quoted)
    if isinstance(actual, float) and isinstance(value, str | int):
        try:
            return float(value) == actual
        except ValueError:
            return False
    if isinstance(actual, tuple):
        actual = list(actual)
    return bool(value == actual)


def params_value(key: str) -> Any:
    node: Any = PARAMS
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return PydanticUndefined
        node = node[part]
    return node


def prose(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def problems(text: str) -> list[str]:
    """What is wrong with the defaults `text` quotes, one line each."""
    body = prose(text)
    found: list[str] = []
    quoted_at = set()
    for m in QUOTED.finditer(body):
        key, default, in_params = m.groups()
        quoted_at.add(m.start())
        if key not in DEFAULTS:
            found.append(f"`{key}` is no settings key")
            continue
        actual = DEFAULTS[key]
        if not all(same(default, a) for a in actual):
            found.append(f"`{key}` (default `{default}`): the settings say {actual}")
        if in_params is not None and not same(in_params, params_value(key)):
            actual = params_value(key)
            found.append(f"`{key}` (params.yaml `{in_params}`): params.yaml has {actual!r}")
    for m in KEY.finditer(body):
        if m.group(1) not in DEFAULTS or m.start() in quoted_at:
            continue
        after = body[m.end() : m.end() + NEAR].split("`", 1)[0]
        if "default" in after:
            said = " ".join(after.split())
            found.append(f"`{m.group(1)}` {said} …: write `key` (default `value`)")
    return found


def test_the_walk_reaches_sections_entries_and_kinds() -> None:
    assert DEFAULTS["train.epochs"] == [Settings.model_fields["train"].default.epochs]
    assert "analysis.power.training_effect" in DEFAULTS  # a section inside a section
    assert "call.out_of_range" in DEFAULTS  # a key of an evaluator kind, entry of a list
    assert "structured_output" in DEFAULTS  # a key of an endpoint model, entry of a mapping
    assert "models" not in DEFAULTS and "scores.evaluators" not in DEFAULTS  # required


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_quoted_defaults_are_the_settings(doc: Path) -> None:
    assert problems(doc.read_text()) == []


def test_the_docs_quote_defaults() -> None:
    quoted = {m.group(1) for doc in DOCS for m in QUOTED.finditer(prose(doc.read_text()))}
    assert {"train.epochs", "train.rewards", "probes.repeats", "call.out_of_range"} <= quoted


def test_a_wrong_or_unreadable_default_is_caught() -> None:
    epochs = DEFAULTS["train.epochs"][0]
    assert problems(f"`train.epochs` (default `{epochs}`)") == []
    assert problems(f"`train.epochs` (default `{epochs + 1}`)") != []
    assert problems(f"`train.epochs` (default `{epochs}`; params.yaml `{epochs + 99}`)") != []
    assert problems("`train.epochs` (7 by default)") != []
    assert problems("`train.nonsense` (default `1`)") == ["`train.nonsense` is no settings key"]
    assert problems("`call.out_of_range` (default `clip`)") != []
