"""Every command that reads a params file (`-p`) names a missing one as given: `error:
nope.yaml not found ...`, exit code 2, no traceback and no absolute path."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from judgelab_cli import app

# The arguments a command needs besides -p before it reads the params file.
REQUIRED = {
    "checkpoint generate": ["--judge", "j", "--prompt", "hello"],
    "checkpoint export": ["--judge", "j", "--out", "out.gguf"],
    "audit": ["--tasks", "tasks.jsonl", "--candidates", "candidates.jsonl"],
}


def commands_with_params(group: typer.core.TyperGroup, prefix: str = "") -> list[str]:
    found = []
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if hasattr(command, "commands"):
            found += commands_with_params(command, f"{path} ")
        elif any("--params" in getattr(p, "opts", ()) for p in command.params):
            found.append(path)
    return found


COMMANDS = commands_with_params(typer.main.get_command(app))  # type: ignore[arg-type]


def test_the_commands_are_found() -> None:
    assert {"scores", "training", "probes", "models list", "serve", "doctor"} <= set(COMMANDS)
    assert set(REQUIRED) <= set(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_params_file_is_named_as_given(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGELAB_ROOT", raising=False)
    # serve's Prefect server, were it asked: nothing listens on port 9
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    monkeypatch.setenv("COLUMNS", "400")  # doctor's table: one line per check
    args = [*command.split(), *REQUIRED.get(command, []), "-p", "nope.yaml"]
    result = CliRunner().invoke(app, args)
    output = result.output
    assert "nope.yaml not found" in output, output
    assert "/nope.yaml" not in output  # not made absolute
    # a clean exit (typer.Exit), not an exception out of the command
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    # doctor reports every check and fails with 1; the others stop at once with 2
    assert result.exit_code == 2, result.output  # bad input, doctor included
