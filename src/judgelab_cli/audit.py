"""`judgelab audit`: the Python API's `audit` (`judgelab.api.audit`) on a tasks file and a
candidates file, with your reward functions or the judges of a params file; the report under
--out. No DVC and no Prefect: one process, as from Python. It prints the decision's verdict,
the judge to use (if any) and the report's path; `judgelab gate --metrics OUT` gates it. A judge
whose calls failed beyond `scores.max_failure_share` is a red line and exit code 4 once the
report is written, as the scores stage's (`judgelab.errors.EXIT_CODES`)."""

from __future__ import annotations

from pathlib import Path

import typer

from judgelab.errors import EXIT_UNAVAILABLE
from judgelab_cli.errors import exit_on_error

TASKS = typer.Option(..., "--tasks", help="Your tasks: a JSONL or parquet file (docs/TASKS.md).")
CANDIDATES = typer.Option(
    ..., "--candidates", help="Your candidates: a JSONL or parquet file (docs/TASKS.md)."
)
JUDGES = typer.Option(
    [],
    "--judge",
    help="A judge: a reward function as 'package.module:function' (TRL's signature), or a "
    "built-in kind (format, syntax); repeat the flag for several. They join the params "
    "file's evaluators.",
)
PARAMS = typer.Option(
    None,
    "--params",
    "-p",
    help="A params file for the models, evaluators and analysis settings (its task sources "
    "and candidates file are not read: --tasks and --candidates are).",
)
OUT = typer.Option(Path("judgelab-audit"), "--out", help="Where the report is written.")
NO_TESTS = typer.Option(
    False, "--no-tests", help="Do not add the execution evaluator (the truth) when none is set."
)


def audit(
    tasks: Path = TASKS,
    candidates: Path = CANDIDATES,
    judge: list[str] = JUDGES,
    params: Path | None = PARAMS,
    out: Path = OUT,
    no_tests: bool = NO_TESTS,
) -> None:
    """Audit judges on your tasks and candidates files in one process (the Python API)."""
    from judgelab.api import audit as run_audit
    from judgelab_cli.stages import configure_logging

    configure_logging()
    with exit_on_error():
        result = run_audit(
            tasks, candidates, judges=judge, settings=params, out_dir=out, tests=not no_tests
        )
    decision = result.decision
    typer.echo(f"decision: {decision.verdict}" + (f" ({decision.judge})" if decision.judge else ""))
    typer.echo(f"report: {result.report}")
    for line in result.failures:
        typer.secho(f"judge failed: {line}", fg="red", err=True)
    if result.failures:
        raise typer.Exit(EXIT_UNAVAILABLE)
