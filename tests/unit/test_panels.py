"""Report section for bias probes: 'not run' without inputs, tables and
images with them, and data strings escaped."""

from __future__ import annotations

import json
from pathlib import Path

from judgelab.report.panels import bias_section, read_probes
from tests.support.report_inputs import write_probe_metrics

JUDGES = ("ruler-a", "rubric-b")


def _png_count(html: str) -> int:
    return html.count('src="data:image/png;base64,')


def test_missing_inputs_say_not_run(tmp_path: Path) -> None:
    for section in (
        bias_section(None),
        bias_section(tmp_path / "missing.json"),
    ):
        assert not section.ran
        assert "not run:" in section.html and "not run:" in section.markdown
        assert _png_count(section.html) == 0


def test_bias_figures_with_ci_and_escaping(tmp_path: Path) -> None:
    path = tmp_path / "probes" / "metrics.json"
    write_probe_metrics(path, (*JUDGES, "<b>evil</b>"))
    probes = read_probes(path)
    assert probes["ruler-a"]["position.position_consistency_ci_low"] == 0.4
    assert "note" not in probes["ruler-a"]
    section = bias_section(path)
    assert section.ran and _png_count(section.html) == 1
    assert "<td>0.600 [0.500, 0.700]</td>" in section.html  # rubric-b position consistency
    assert "<b>evil</b>" not in section.html and "&lt;b&gt;evil&lt;/b&gt;" in section.html
    # CI bounds are attached to their figure, not rows of their own
    assert "consistency_ci_low" not in section.html
    # plain headings, not metric keys; a figure the report does not show is left out
    labels = [line.split(" | ")[0].lstrip("| ") for line in section.markdown.splitlines()
              if line.startswith("| ") and not line.startswith(("| figure", "| ---"))]  # fmt: skip
    assert labels == [
        "position consistency: a pair keeps its order when the slots swap",
        "self-preference: its own family's score gap, same task and verdict",
        "attack grader_comment: success (the attacked failing code above its call's mean)",
        "attack grader_comment: uplift (success − baseline)",
    ]
    assert "position.position_consistency" not in section.markdown
    assert "verbosity_delta" not in section.markdown


def test_unreadable_probe_file_is_not_run(tmp_path: Path) -> None:
    path = tmp_path / "metrics.json"
    path.write_text("{not json")
    assert not bias_section(path).ran
    path.write_text(json.dumps([1, 2]))
    assert not bias_section(path).ran
