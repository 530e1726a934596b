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
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from judgelab.analysis import run_analysis
from tests.support.report_inputs import write_probe_metrics, write_training_histories
from tests.unit.test_analysis import SETTINGS, fixture_rollouts, fixture_scores, fixture_tasks

pytestmark = pytest.mark.integration

WIDTH, HEIGHT = 1280, 9000


def find_chromium() -> str | None:
    return next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's chromium; installed here (apt-get, as root) when missing."""
    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and apt-get as root is not available")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
    subprocess.run([*apt, "update", "-q"], env=env, capture_output=True, timeout=900)
    proc = subprocess.run(
        [*apt, "install", "-y", "-q", "chromium"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    found = find_chromium()
    if proc.returncode != 0 or not found:
        pytest.skip(f"apt-get install chromium failed: {proc.stderr[-500:]}")
    return found


def headless(chromium: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # root in a container
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--hide-scrollbars",
            # no name resolves: a CDN script or font could not load
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--virtual-time-budget=5000",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


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
    for heading in ("Headline", "Findings", "Plots", "Training curves", "Bias probes"):
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
