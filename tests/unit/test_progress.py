"""The progress helper: rate and ETA columns, relabelling, and the off switch."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from judgelab.progress import Pace, format_rate, progress


def test_format_rate_fast_and_slow() -> None:
    assert format_rate(None, "group") == "- group/s"
    assert format_rate(4.0, "group") == "4.0 group/s"
    assert format_rate(1 / 45, "group") == "45 s/group"


def test_bar_counts_relabels_and_shows_rate_and_eta() -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=140, force_terminal=True)
    with progress("scores", 3, unit="group", console=console) as advance:
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


def test_not_a_terminal_prints_a_line_per_step_with_elapsed_and_eta(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CI logs and `dvc repro > file`: a line per step, so a long stage is never silent."""
    clock = iter([100.0, 110.0, 130.0, 160.0])
    monkeypatch.setattr("judgelab.progress.time.monotonic", lambda: next(clock))
    buf = io.StringIO()
    with progress("train", None, unit="step", console=Console(file=buf, width=40)) as advance:
        advance(0, total=4)  # nothing done, no new label: no line
        advance(description="train: epoch 0 sampled")  # 1 of 4 after 10 s
        advance(0, description="train: scoring")  # relabel only
        advance()  # 2 of 4 after 60 s, 50 s after the first: the pace from the first step on
    lines = buf.getvalue().splitlines()
    assert lines == [
        "[judgelab] train: epoch 0 sampled: 1/4 step, 10 s/step, elapsed 0:10, ETA 0:30",
        "[judgelab] train: scoring: 1/4 step, 30 s/step, elapsed 0:30, ETA 1:30",
        "[judgelab] train: scoring: 2/4 step, 50 s/step, elapsed 1:00, ETA 1:40",
    ]


def test_a_resumed_stage_leaves_its_cache_replay_out_of_the_rate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Three cached units at once, then judge calls of 50 s: the ETA is at 50 s a unit, not at
    the 4 units in 50 s the plain average would give."""
    clock = iter([0.0, 0.01, 0.02, 0.03, 50.03, 150.03])
    monkeypatch.setattr("judgelab.progress.time.monotonic", lambda: next(clock))
    buf = io.StringIO()
    with progress("scores", 10, unit="group", console=Console(file=buf, width=40)) as advance:
        for _ in range(5):
            advance()
    lines = buf.getvalue().splitlines()
    # while every unit came at once, the plain average
    assert lines[2] == "[judgelab] scores: 3/10 group, 100.0 group/s, elapsed 0:00, ETA 0:00"
    assert lines[3:] == [
        "[judgelab] scores: 4/10 group, 50 s/group, elapsed 0:50, ETA 5:00 "
        "(3 at once, not in the rate)",
        "[judgelab] scores: 5/10 group, 75 s/group, elapsed 2:30, ETA 6:15 "
        "(3 at once, not in the rate)",
    ]


def test_the_start_up_before_the_first_cache_hit_does_not_end_the_opening_run() -> None:
    """A resumed stage starts a server and loads a model (12 s here) before its first cache
    hit; its three cached units still stay out of the rate of the 50 s calls after them."""
    pace = Pace(0.0)
    for now in (12.0, 12.01, 12.02, 62.02, 112.02):
        pace.step(1, now)
    assert pace.instant == 3
    assert pace.speed(112.02) == pytest.approx(2 / 100.0)
    assert pace.eta(10, 112.02) == pytest.approx(5 * 50.0)


def test_a_fresh_run_of_slow_steps_is_timed_from_its_first_step() -> None:
    """Judge calls of 20 s after a 10 s start-up: the plain average after the first call, then
    the calls' own pace; nothing is called "at once"."""
    pace = Pace(0.0)
    pace.step(1, 30.0)
    assert pace.speed(30.0) == pytest.approx(1 / 30.0) and pace.instant == 0
    pace.step(1, 50.0)
    pace.step(1, 70.0)
    assert pace.speed(70.0) == pytest.approx(1 / 20.0) and pace.instant == 0
    assert pace.eta(5, 70.0) == pytest.approx(40.0)


def test_a_stage_of_quick_units_keeps_the_plain_average() -> None:
    pace = Pace(0.0)
    for i in range(1, 5):
        pace.step(1, i * 0.5)
    assert pace.instant == 0 and pace.speed(2.0) == 2.0 and pace.eta(10, 2.0) == 3.0


def test_library_chatter_is_quiet_unless_verbose() -> None:
    """A run's log had one line per HTTP request; they show only with `judgelab -v`."""
    import logging

    from judgelab_cli.stages import QuietLibraries

    quiet = QuietLibraries()
    record = lambda name, level: logging.LogRecord(name, level, "", 0, "m", None, None)  # noqa: E731
    assert not quiet.filter(record("httpx", logging.INFO))
    assert not quiet.filter(record("LiteLLM", logging.INFO))
    assert quiet.filter(record("httpx", logging.WARNING))
    assert quiet.filter(record("judgelab.training.trainer", logging.INFO))
    assert quiet.filter(record("judgelab.models.server", logging.DEBUG))
