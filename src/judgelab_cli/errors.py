"""How a command fails: `error: <message>` in red on stderr and exit code 2, no traceback."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

from judgelab.errors import JudgelabError


def fail(message: str) -> NoReturn:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(2) from None


@contextmanager
def exit_on_error() -> Iterator[None]:
    """A JudgelabError raised inside the block fails the command with its message."""
    try:
        yield
    except JudgelabError as err:
        fail(str(err))
