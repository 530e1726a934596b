"""`judgelab ui prefect|mlflow`: start a local UI on 127.0.0.1, offline.

Each prints the underlying command first, so it can also be run by hand.
"""

from __future__ import annotations

import os
import shlex
from typing import Annotated

import typer

from judgelab.extras import require
from judgelab_cli.deploy import MLFLOW_PORT, PREFECT_PORT, mlflow_ui_command, prefect_server_command
from judgelab_cli.errors import exit_on_error

app = typer.Typer(
    help="Start the Prefect or MLflow UI on 127.0.0.1 (offline).", no_args_is_help=True
)

DRY = typer.Option("--dry-run", help="Print the command and exit.")


def _exec(cmd: list[str], env: dict[str, str], prefix: str, dry_run: bool) -> None:
    shown = [f"{k}={env[k]}" for k in sorted(env) if k.startswith(prefix)]
    typer.echo(" ".join(shlex.quote(part) for part in [*shown, *cmd]))
    if dry_run:
        return
    with exit_on_error():
        require("pipeline", f"judgelab ui ({cmd[0]})")
    os.execvpe(cmd[0], cmd, env)


@app.command()
def prefect(
    port: Annotated[int, typer.Option(help="Port of the API and the UI.")] = PREFECT_PORT,
    dry_run: Annotated[bool, DRY] = False,
) -> None:
    """Prefect server + UI (flow runs, task retries, logs) at http://127.0.0.1:PORT."""
    cmd, env = prefect_server_command(port)
    _exec(cmd, env, "PREFECT_", dry_run)


@app.command()
def mlflow(
    port: Annotated[int, typer.Option(help="Port of the UI.")] = MLFLOW_PORT,
    dry_run: Annotated[bool, DRY] = False,
) -> None:
    """MLflow UI over the project's mlflow.db at http://127.0.0.1:PORT."""
    cmd, env = mlflow_ui_command(port)
    _exec(cmd, env, "MLFLOW_", dry_run)
