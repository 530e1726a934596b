"""docs/CONFIG.md is generated from the settings models and must be current."""

from __future__ import annotations

from pathlib import Path

from judgelab import config
from judgelab.config.evaluators import SETTINGS, JudgeCallSettings
from judgelab.config_docs import OUTPUT, render

ROOT = Path(__file__).resolve().parents[2]


def test_committed_reference_is_current() -> None:
    assert (ROOT / OUTPUT).read_text(encoding="utf-8") == render(), (
        "docs/CONFIG.md is stale: run `.venv/bin/python -m judgelab.config_docs`"
    )


def test_reference_covers_every_section_key_and_kind() -> None:
    text = render()
    for section in config.Settings.model_fields:
        assert f"## `{section}`" in text
    for model in (config.AnalysisSettings, JudgeCallSettings, config.EndpointModel):
        for key in model.model_fields:
            assert f"| `{key}` |" in text, (model.__name__, key)
    for settings in SETTINGS.values():
        assert f"— {settings.__name__}" in text
    assert "| `praise_threshold` | float | `0.8` | ≥ 0, ≤ 1 |" in text
