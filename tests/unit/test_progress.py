"""The progress helper: rate and ETA columns, relabelling, and the off switch."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from judgelab.progress import format_rate, progress


def test_format_rate_fast_and_slow() -> None:
    assert format_rate(None, "group") == "- group/s"
    assert format_rate(4.0, "group") == "4.0 group/s"
    assert format_rate(1 / 45, "group") == "45 s/group"


def test_bar_counts_relabels_and_shows_rate_and_eta() -> None:
    buf = io.StringIO()
    with progress("scores", 3, unit="group", console=Console(file=buf, width=140)) as advance:
        advance(0, description="scores: ruler")
        advance()
        advance(2)
    out = buf.getvalue()
    assert "scores: ruler" in out and "3/3" in out
    assert "group/s" in out and "ETA" in out and "elapsed" in out


def test_off_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGELAB_PROGRESS", "0")
    buf = io.StringIO()
    with progress("rollouts", 2, console=Console(file=buf)) as advance:
        advance()
        advance(description="x")
    assert buf.getvalue() == ""
