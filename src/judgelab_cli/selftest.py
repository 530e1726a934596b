"""`judgelab selftest`: planted judges through judgelab's own statistics (coverage of the CIs,
family-wise error of the paired comparisons, power of the tasks-needed figure)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def selftest(
    audits: Annotated[int, typer.Option(min=10, help="Simulated audits per cell.")] = 500,
    clusters: Annotated[
        str, typer.Option(help="Mixed tasks (clusters) per simulated audit, comma-separated.")
    ] = "5,8,10,15,20,40",
    bootstrap: Annotated[int, typer.Option(min=50, help="Bootstrap resamples per CI.")] = 500,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 0,
    truth_tasks: Annotated[
        int, typer.Option(min=500, help="Simulated tasks behind each true value.")
    ] = 20000,
    out: Annotated[
        Path | None, typer.Option(help="Also write the results as JSON to this file.")
    ] = None,
) -> None:
    """Simulate audits of planted judges (known accuracy, ties, position bias, leniency) and
    analyse them with judgelab's own code: does each 95 % CI cover the truth 95 % of the time,
    do judges planted alike stay unseparated, does the tasks-needed figure give its power?"""
    from rich.console import Console
    from rich.markdown import Markdown

    from judgelab.analysis.selftest import SelftestSettings, run_selftest
    from judgelab.report.selftest import selftest_markdown

    try:
        sizes = tuple(int(t) for t in clusters.split(","))
    except ValueError:
        raise typer.BadParameter(
            f"--clusters: integers separated by commas, got {clusters!r}"
        ) from None
    if any(n < 2 for n in sizes):
        raise typer.BadParameter("--clusters: every audit needs at least 2 mixed tasks")
    result = run_selftest(
        SelftestSettings(
            audits=audits, clusters=sizes, bootstrap=bootstrap, seed=seed, truth_tasks=truth_tasks
        )
    )
    if out is not None:
        out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    Console(width=160).print(Markdown(selftest_markdown(result)))
