"""Every YAML example in README and docs/ is valid configuration: pasted into params.yaml as
written (its sections replace or extend the shipped ones), it passes judgelab's own validation.
The guides to adding a kind, a source or an attack (docs/ADDING_*.md) are left out: their
examples name what exists only once the reader has added it (tests/unit/test_change_budget.py
adds each to a copy of the package and runs it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from judgelab.config import parse_settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = [
    (f"{doc.stem}-{i}", block)
    for doc in DOCS
    if not doc.name.startswith("ADDING_")
    for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S))
]
BLOCKS = [block for _, block in EXAMPLES]


def pasted(example: dict) -> dict:
    """params.yaml with the example pasted in: a section it names is merged key by key,
    except `scores`, whose evaluator list the example replaces. An example with `models`,
    `tasks`, `rollouts` and `scores` is a whole parameters file (the quick start): alone."""
    if {"models", "tasks", "rollouts", "scores"} <= set(example):
        return example
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for key, value in example.items():
        if isinstance(value, dict) and isinstance(params.get(key), dict) and key != "scores":
            params[key] = {**params[key], **value}
        else:
            params[key] = value
    return params


def test_readme_has_yaml_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS, ids=[name for name, _ in EXAMPLES])
def test_readme_yaml_example_is_valid(block: str) -> None:
    parse_settings(pasted(yaml.safe_load(block)))
