"""Every judgelab command and sub-command answers --help with its usage and a description."""

from __future__ import annotations

from typing import Any

import typer
from typer.testing import CliRunner

from judgelab_cli import app


def command_paths(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    if hasattr(group, "commands"):  # a group (typer may bring its own click)
        for name, sub in group.commands.items():
            paths += command_paths(sub, (*prefix, name))
    return paths


def test_help_everywhere() -> None:
    root = typer.main.get_command(app)
    paths = command_paths(root)
    names = {" ".join(p) for p in paths}
    for expected in (
        "serve",
        "doctor",
        "ui prefect",
        "ui mlflow",
        "validate scores",
        "pipeline",
        "power",
    ):
        assert expected in names
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage:" in result.output, path
        command = root
        for part in path:
            command = command.commands[part]  # type: ignore[attr-defined]
        assert (command.help or "").strip(), f"{' '.join(path)} has no description"


def test_every_command_is_listed_and_each_stage_has_one() -> None:
    from judgelab.flows.stages import STAGES

    root = typer.main.get_command(app)
    listed = CliRunner().invoke(app, ["--help"], terminal_width=200).output
    names = {line.strip("│ ").split(" ")[0] for line in listed.splitlines()}
    commands = root.commands  # type: ignore[attr-defined]
    assert not [name for name, command in commands.items() if command.hidden]
    assert set(commands) <= names
    assert {stage.command for stage in STAGES} <= set(commands)
    assert "train" not in commands and "probe" not in commands
    assert [p.name for p in commands["probes"].params] == ["params", "fail_above", "reanalyse"]


def test_version() -> None:
    from importlib.metadata import version

    from typer.testing import CliRunner

    from judgelab_cli import app

    out = CliRunner().invoke(app, ["--version"])
    assert out.exit_code == 0 and out.output.strip() == f"judgelab {version('judgelab')}"
