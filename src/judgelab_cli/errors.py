"""How a command fails: `error: <message>` in red on stderr, no traceback, and the exit code
`judgelab.errors.exit_code` gives (the table: `judgelab.errors.EXIT_CODES`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer

from judgelab.errors import EXIT_BAD_INPUT, JudgelabError, exit_code


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    typer.secho(f"error: {message}", fg="red", err=True)
    raise typer.Exit(code) from None


@contextmanager
def exit_on_error() -> Iterator[None]:
    """A JudgelabError raised inside the block fails the command with its message."""
    try:
        yield
    except JudgelabError as err:
        fail(str(err), exit_code(err))
