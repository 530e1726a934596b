"""report.md and report.html are what the renderers wrote before the report model
(`report.model`) replaced the per-format writers: byte for byte, on the reference audit's
committed inputs and on the unit golden's metrics alone (tests/support/report_golden.py).
A change to a report's text regenerates the expected files on purpose:
`PYTHONPATH=src python tests/support/report_golden.py --write`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.report_golden import EXPECTED, PLACEHOLDER, all_reports, normalise

REGEN = "the report changed: if on purpose, `python tests/support/report_golden.py --write`"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return all_reports(tmp_path_factory.mktemp("report"))


@pytest.mark.parametrize("name", ["reference.md", "reference.html", "bare.md", "bare.html"])
def test_the_report_is_the_expected_one_byte_for_byte(reports: dict[str, str], name: str) -> None:
    expected = (EXPECTED / name).read_text(encoding="utf-8")
    got = reports[name]
    for i, (a, b) in enumerate(zip(expected.splitlines(), got.splitlines(), strict=False)):
        assert a == b, f"{name} line {i + 1}: {REGEN}"
    assert got == expected, REGEN


def test_the_reference_html_embeds_every_image(reports: dict[str, str]) -> None:
    """The placeholder stands for each embedded PNG: the decision's forest plot, the
    histograms, the judges' comparison, the training curves and the bias panels."""
    html = reports["reference.html"]
    assert html.count(PLACEHOLDER) == (EXPECTED / "reference.html").read_text().count(PLACEHOLDER)
    assert html.count(PLACEHOLDER) >= 10


def test_normalise_keeps_the_text_around_an_image() -> None:
    assert normalise('<img src="data:image/png;base64,iVBOR+/w==">') == f'<img src="{PLACEHOLDER}">'
    assert normalise("no image") == "no image"


def test_the_expected_files_are_committed() -> None:
    assert sorted(p.name for p in Path(EXPECTED).iterdir()) == [
        "bare.html", "bare.md", "reference.html", "reference.md",
    ]  # fmt: skip
