"""`judgelab doctor`: check models, the llama.cpp build, endpoints, the sandbox and disk."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from judgelab.errors import EXIT_BAD_INPUT, EXIT_UNAVAILABLE

MARK = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "fail": "[red]FAIL[/]"}


def doctor(
    params: Annotated[Path, typer.Option("--params", "-p", help="Parameters file.")] = Path(
        "params.yaml"
    ),
    rehash: Annotated[
        bool, typer.Option(help="Re-hash every model file instead of trusting its stamp.")
    ] = False,
) -> None:
    """Check that this machine can run the audit; exit 2 if only params.yaml is invalid, 4 if
    any other check fails."""
    from judgelab.doctor import run_checks

    checks = run_checks(params, rehash=rehash)
    table = Table(title="judgelab doctor")
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("detail", overflow="fold")
    for c in checks:
        # a detail is text, not markup: the cpu row's "[avx avx2 ...]" must print as written
        table.add_row(c.name, MARK[c.status], escape(c.detail))
    Console(width=max(100, Console().width)).print(table)
    failed = [c.name for c in checks if c.status == "fail"]
    if failed:
        typer.secho(f"{len(failed)} check(s) failed: {', '.join(failed)}", fg="red", err=True)
        # bad params are bad input; any other failed check, something that cannot be used
        raise typer.Exit(EXIT_BAD_INPUT if failed == ["config"] else EXIT_UNAVAILABLE)
