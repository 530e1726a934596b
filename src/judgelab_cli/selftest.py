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
    group_sizes: Annotated[
        str, typer.Option(help="Candidates per task (k), comma-separated; each gets its tables.")
    ] = "4,8",
    bootstrap: Annotated[int, typer.Option(min=50, help="Bootstrap resamples per CI.")] = 500,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 0,
    truth_tasks: Annotated[
        int, typer.Option(min=500, help="Simulated tasks behind each true value.")
    ] = 20000,
    out: Annotated[
        Path | None, typer.Option(help="Also write the results as JSON to this file.")
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option(help="Also write the tables, with every cell, as Markdown to this file."),
    ] = None,
    decision: Annotated[
        bool,
        typer.Option(
            "--decision",
            help="Self-test the decision instead (planted judge sets through the rulebook and "
            "the pair verdicts at analysis.margin, at 164 and 1,000 tasks; --audits per row).",
        ),
    ] = False,
) -> None:
    """Simulate audits of planted judges (known signal, per-task skill, ties, unscored
    candidates, position bias, leniency, a blind one) and analyse them with judgelab's own
    code: does each 95 % CI, paired differences included, cover the truth 95 % of the time, do
    judges planted alike stay unseparated, do judges planted in order rank in that order, does
    the tasks-needed figure give its power?"""
    from rich.console import Console
    from rich.markdown import Markdown

    from judgelab.analysis.selftest import SelftestSettings, run_selftest
    from judgelab.report.selftest import selftest_markdown

    if decision:
        _decision(audits, seed, truth_tasks, out, markdown)
        return
    sizes = _integers("--clusters", clusters, 2, "every audit needs at least 2 mixed tasks")
    ks = _integers("--group-sizes", group_sizes, 2, "a group needs at least 2 candidates")
    result = run_selftest(
        SelftestSettings(audits=audits, clusters=sizes, group_sizes=ks, bootstrap=bootstrap,
                         seed=seed, truth_tasks=truth_tasks)
    )  # fmt: skip
    if out is not None:
        out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    if markdown is not None:
        markdown.write_text(selftest_markdown(result))
    Console(width=160).print(Markdown(selftest_markdown(result, cells=False)))


def _decision(
    audits: int, seed: int, truth_tasks: int, out: Path | None, markdown: Path | None
) -> None:
    """`judgelab selftest --decision`: the decision's self-test (docs/SELFTEST.md)."""
    from rich.console import Console
    from rich.markdown import Markdown

    from judgelab.analysis.decision_selftest import (
        DecisionSelftestSettings,
        run_decision_selftest,
    )
    from judgelab.report.selftest import decision_markdown

    result = run_decision_selftest(
        DecisionSelftestSettings(audits=audits, seed=seed, truth_tasks=truth_tasks)
    )
    if out is not None:
        out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    if markdown is not None:
        markdown.write_text(decision_markdown(result))
    Console(width=160).print(Markdown(decision_markdown(result)))


def _integers(option: str, text: str, least: int, why: str) -> tuple[int, ...]:
    """`text` as comma-separated integers, each at least `least` (else `why`)."""
    try:
        values = tuple(int(t) for t in text.split(","))
    except ValueError:
        raise typer.BadParameter(f"{option}: integers separated by commas, got {text!r}") from None
    if any(n < least for n in values):
        raise typer.BadParameter(f"{option}: {why}")
    return values
