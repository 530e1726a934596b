"""`judgelab validate KIND PATH`: check a table against its schema."""

from __future__ import annotations

from pathlib import Path

import typer

from judgelab.errors import EXIT_BAD_INPUT, TableError
from judgelab.schemas import SCHEMAS, validate_file

app = typer.Typer(
    help="Validate a table (parquet or CSV) against judgelab's schemas.", no_args_is_help=True
)


def _validate(kind: str, path: Path) -> None:
    try:
        frame = validate_file(path, kind)
    except TableError as err:
        typer.secho(str(err), fg="red", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    typer.echo(f"{path}: valid {kind} table ({frame.height} rows)")


def _make(kind: str) -> None:
    @app.command(
        name=kind, help=f"Validate a {kind} table; exit 0 if valid, 2 with the reasons if not."
    )
    def command(path: Path = typer.Argument(..., help="Parquet or CSV file.")) -> None:
        _validate(kind, path)


for _kind in SCHEMAS:
    _make(_kind)
