"""docs/CONFIG.md, generated from the settings models in judgelab.config.

One table per settings section (every key, its type, default, bounds and description), in
params.yaml order; a model registry entry or an evaluator is documented once per `kind`
(evaluator kinds as `judgelab.config.evaluators` lists them). Regenerate after changing
the settings: `python -m judgelab.config_docs` (a test checks the committed file is current).
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from judgelab import config
from judgelab.config.evaluators import SETTINGS, EvaluatorSettings
from judgelab.io import write_text
from judgelab.paths import project_root

OUTPUT = Path("docs/CONFIG.md")
MAX_DEFAULT = 60

_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _anchor(model: type[BaseModel]) -> str:
    return model.__name__.lower()


def _kinds(model: type[BaseModel]) -> list[type[BaseModel]]:
    """The settings models a field of type `model` takes: every registered kind's for an
    evaluator (its kind is looked up at validation), else `model` itself."""
    if model is EvaluatorSettings:
        return list(SETTINGS.values())
    return [model]


def fmt_type(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return fmt_type(get_args(annotation)[0])
    if origin is Literal:
        return " or ".join(f"`{v}`" for v in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " or ".join(fmt_type(a) for a in get_args(annotation))
    if origin is list:
        return f"list of {fmt_type(get_args(annotation)[0])}"
    if origin is dict:
        key, value = get_args(annotation)
        return f"map {fmt_type(key)} → {fmt_type(value)}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return " or ".join(f"[{m.__name__}](#{_anchor(m)})" for m in _kinds(annotation))
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def fmt_default(field: Any) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "**required**"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(section defaults)"
    text = repr(value) if isinstance(value, str) else str(value).replace("None", "null")
    if isinstance(value, bool):
        text = str(value).lower()
    if len(text) > MAX_DEFAULT:
        text = text[: MAX_DEFAULT - 1] + "…"
    return f"`{text}`"


def fmt_bounds(field: Any) -> str:
    out = []
    for meta in field.metadata:
        for attr, sign in _BOUNDS:
            if getattr(meta, attr, None) is not None:
                out.append(f"{sign} {getattr(meta, attr)}")
        if getattr(meta, "pattern", None):
            out.append(f"matches `{meta.pattern}`")
    return ", ".join(out)


def model_table(model: type[BaseModel], path: str) -> list[str]:
    lines = [f'<a id="{_anchor(model)}"></a>', f"### `{path}` — {model.__name__}", ""]
    doc = (model.__doc__ or "").strip()
    if doc and model.__doc__ != BaseModel.__doc__:
        lines += [" ".join(doc.split()), ""]
    lines += ["| key | type | default | bounds | description |", "| --- | --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{name}`",
                    _cell(fmt_type(field.annotation)),
                    _cell(fmt_default(field)),
                    _cell(fmt_bounds(field)),
                    _cell(field.description or ""),
                ]
            )
            + " |"
        )
    return lines + [""]


def _nested(annotation: Any) -> list[type[BaseModel]]:
    """Settings models reachable from a field's type (through unions, lists, maps)."""
    found: list[type[BaseModel]] = []
    stack = [annotation]
    while stack:
        ann = stack.pop(0)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            found += _kinds(ann)
        else:
            stack += [a for a in get_args(ann) if not isinstance(a, str | int | float)]
    return found


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "All settings live in `params.yaml`, one section per stage; judgelab validates it on",
        "load and rejects unknown keys and bad values, naming the key. Generated from",
        "`src/judgelab/config` (evaluator kinds: `src/judgelab/config/evaluators.py`) by",
        "`python -m judgelab.config_docs`; do not edit by hand.",
        "",
        "The default column is what a key takes when `params.yaml` leaves it out. The shipped",
        "`params.yaml` sets many keys to other values (e.g. `train.epochs: 1`, held-out",
        "`limit: 2`), sized for `make run`: the value in effect is the one in your file.",
        "",
    ]
    seen: set[type[BaseModel]] = set()

    def walk(model: type[BaseModel], path: str) -> None:
        if model in seen:
            return
        seen.add(model)
        lines.extend(model_table(model, path))
        for name, field in model.model_fields.items():
            ann = field.annotation
            suffix = ""
            if get_origin(ann) is dict:
                suffix = ".<name>"
            elif get_origin(ann) is list:
                suffix = "[]"
            for sub in _nested(ann):
                walk(sub, f"{path}.{name}{suffix}" if path else f"{name}{suffix}")

    for name, field in config.Settings.model_fields.items():
        lines += [f"## `{name}`", ""]
        for sub in _nested(field.annotation):
            suffix = {dict: ".<name>", list: "[]"}.get(get_origin(field.annotation), "")  # type: ignore[arg-type]
            walk(sub, f"{name}{suffix}")
    return "\n".join(lines).rstrip() + "\n"


def main() -> None:
    path = project_root() / OUTPUT
    write_text(path, render())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
