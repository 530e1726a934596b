"""`dvc plots show` renders offline through the vendored-vega template named in .dvc/config.

A scratch DVC project gets the checkout's .dvc/config and templates/, and a plot in the
format the analysis stage writes. Plain `dvc plots show` (no flags: the config names the
template) must write a page with no remote script, and Chromium, with the network cut off,
must draw the chart.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from judgelab.dvc_plots import TEMPLATE, VENDOR, VENDORED, build_template
from tests.support.browser import headless

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.integration


def test_committed_template_matches_vendored_files() -> None:
    assert (ROOT / TEMPLATE).read_text(encoding="utf-8") == build_template(ROOT / VENDOR), (
        "templates/dvc_plots.html is stale: run `python -m judgelab.dvc_plots`"
    )
    for package, version, _ in VENDORED:
        licence = (ROOT / VENDOR / f"{package}@{version}" / "LICENSE").read_text()
        assert "BSD" in licence or "Redistribution and use" in licence
    config = (ROOT / ".dvc/config").read_text()
    assert "html_template = ../templates/dvc_plots.html" in config


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    proj = tmp_path_factory.mktemp("plots")
    subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
    shutil.copytree(ROOT / "templates", proj / "templates")
    subprocess.run([str(BIN / "dvc"), "init", "-q"], cwd=proj, check=True)
    shutil.copy(ROOT / ".dvc/config", proj / ".dvc/config")
    data = proj / "data/analysis/plots/judge_comparison.csv"
    data.parent.mkdir(parents=True)
    data.write_text(
        "evaluator,metric,value,ci_low,ci_high\n"
        "ruler-a,false_praise_absolute,0.75,0.5,1.0\n"
        "rubric-b,false_praise_absolute,0.25,0.0,0.5\n"
    )
    spec = {"template": "bar_horizontal", "x": "value", "y": "evaluator"}
    (proj / "dvc.yaml").write_text(
        yaml.safe_dump({"plots": [{"data/analysis/plots/judge_comparison.csv": spec}]})
    )
    proc = subprocess.run(
        [str(BIN / "dvc"), "plots", "show", "-o", "out"],
        cwd=proj,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proj / "out" / "index.html"


def test_page_has_no_remote_scripts(rendered: Path) -> None:
    page = rendered.read_text(encoding="utf-8")
    assert re.findall(r"<script[^>]*\bsrc\s*=", page, flags=re.I) == []
    assert "cdn.jsdelivr" not in page
    assert page.count("<script") >= 4  # three libraries + the plot
    assert "vegaEmbed(" in page and "ruler-a" in page


def test_chromium_draws_the_plot_offline(chromium: str, rendered: Path) -> None:
    proc = headless(chromium, "--dump-dom", rendered.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    # vega-embed replaced the empty div with its rendered chart
    assert 'class="vega-embed' in proc.stdout
    assert "<canvas" in proc.stdout or 'class="marks"' in proc.stdout
