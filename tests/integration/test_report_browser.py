"""report.html in a real headless Chromium (Debian's package), with the network cut off.

The report is built by `run_analysis` from the analysis tests' fixture tables plus a training
history and probe metrics in the layout their stages write. Chromium runs with every host
name unresolvable, so anything the page needed from a CDN would be missing. Checks: the DOM
holds the tables and the sections, and the screenshot shows the plots (their colours cover
real areas of the page) and the table.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from judgelab.report.outputs import run_analysis
from tests.support.browser import headless
from tests.support.report_inputs import write_probe_metrics, write_training_histories
from tests.unit.test_analysis import SETTINGS, fixture_rollouts, fixture_scores, fixture_tasks

pytestmark = pytest.mark.integration

WIDTH, HEIGHT = 1280, 9000


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("report")
    scores = fixture_scores()
    judges = tuple(sorted(set(scores["evaluator"].to_list()) - {"execution"}))[:2]
    write_training_histories(base / "training", judges)
    write_probe_metrics(base / "probes" / "metrics.json", judges)
    run_analysis(
        fixture_tasks(),
        fixture_rollouts(),
        scores,
        SETTINGS,
        base / "analysis",
        training_dir=base / "training",
        probes_metrics=base / "probes" / "metrics.json",
    )
    return base / "analysis" / "report.html"


def test_report_needs_nothing_from_the_network(report: Path) -> None:
    text = report.read_text()
    for needle in ('src="http', "src='http", 'href="http', "@import", "<script"):
        assert needle not in text, needle


def test_dom_has_table_and_sections(chromium: str, report: Path) -> None:
    proc = headless(chromium, "--dump-dom", report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert '<table id="headline">' in dom and dom.count("<tr>") >= 6
    for heading in ("Headline", "Findings", "Plots", "Training on each judge", "Bias probes"):
        assert f">{heading}</h2>" in dom
    assert 'id="training"' in dom and 'id="bias"' in dom and "not run" not in dom
    assert dom.count('src="data:image/png;base64,') >= 4


def colour_pixels(img: np.ndarray, hex_colour: str, tol: int = 12) -> int:
    rgb = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)])
    return int((np.abs(img[..., :3].astype(int) - rgb).max(axis=-1) <= tol).sum())


def test_screenshot_shows_table_and_plots(chromium: str, report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    proc = headless(
        chromium, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", report.as_uri()
    )
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    keep = os.environ.get("JUDGELAB_KEEP_SCREENSHOT")
    if keep:
        shutil.copy(shot, keep)
    img = np.asarray(Image.open(shot).convert("RGB"))
    assert img.shape[:2] == (HEIGHT, WIDTH)
    assert img.std() > 20  # not a blank page
    # the headline table's header row background
    assert colour_pixels(img, "#f2f4f7", tol=2) > 2000
    # each plot's own colours, decoded from the data URIs and drawn
    for what, colour in (
        ("histogram: passing code", "#2a9d8f"),
        ("histogram: failing code", "#e76f51"),
        ("judge comparison bars", "#457b9d"),
        ("training curves (first judge)", "#1f77b4"),
        ("bias panel bars", "#8338ec"),
    ):
        assert colour_pixels(img, colour) > 300, what
