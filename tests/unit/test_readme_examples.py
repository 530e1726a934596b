"""Every YAML example in README is valid configuration: pasted into params.yaml as written (its
sections replace or extend the shipped ones), it passes judgelab's own validation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from judgelab.config import parse_settings

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def pasted(example: dict) -> dict:
    """params.yaml with the example pasted in: a section it names is merged key by key,
    except `scores`, whose evaluator list the example replaces."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for key, value in example.items():
        if isinstance(value, dict) and isinstance(params.get(key), dict) and key != "scores":
            params[key] = {**params[key], **value}
        else:
            params[key] = value
    return params


def test_readme_has_yaml_examples() -> None:
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_yaml_example_is_valid(block: str) -> None:
    parse_settings(pasted(yaml.safe_load(block)))
