"""`judgelab sandbox run FILE`: run a Python file in the execution sandbox.

Prints the sandbox's verdict as one JSON object on stdout (status, exit_code, timed_out,
duration_s, stdout_tail, stderr_tail). Exit code 0 whenever the sandbox ran the file,
whatever the verdict; 2 when the file is missing or unreadable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from judgelab.sandbox import run_python
from judgelab_cli.errors import fail

app = typer.Typer(
    help="Run untrusted Python in the execution sandbox (see judgelab.sandbox).",
    no_args_is_help=True,
)


@app.command("run")
def run(
    file: Annotated[Path, typer.Argument(help="Python file to run.")],
    timeout: Annotated[float, typer.Option("--timeout", min=0.001, help="Wall-clock limit, s.")],
    cpu: Annotated[
        float | None,
        typer.Option("--cpu", min=0.001, help="CPU-time limit, s (default: --timeout)."),
    ] = None,
    memory_mb: Annotated[
        int, typer.Option("--memory-mb", min=32, help="Address-space limit per process, MB.")
    ] = 1024,
    output_limit: Annotated[
        int, typer.Option("--output-limit", min=0, help="Bytes of stdout/stderr tail to keep.")
    ] = 64_000,
) -> None:
    """Run FILE in the sandbox and print the JSON verdict."""
    try:
        code = file.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as err:
        fail(f"cannot read {file}: {err.strerror or err}")
    result = run_python(
        code, timeout_s=timeout, cpu_s=cpu, memory_mb=memory_mb, output_limit=output_limit
    )
    typer.echo(result.to_json())
