"""`judgelab power`: how many task groups it takes to rank two judges, from a scores table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from judgelab.flows.paths import SCORES
from judgelab_cli.errors import exit_on_error


def power(
    scores: Annotated[
        Path, typer.Option("--scores", help="Scores table (the scores stage's output).")
    ] = SCORES,
    params: Annotated[Path, typer.Option("--params", "-p", help="Parameters file.")] = Path(
        "params.yaml"
    ),
    margin: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Smallest difference in the primary worth acting on (analysis.margin).",
        ),
    ] = None,
    alpha: Annotated[
        float | None, typer.Option(min=0.0, max=1.0, help="Two-sided significance level.")
    ] = None,
    target: Annotated[
        float | None,
        typer.Option("--power", min=0.0, max=1.0, help="Chance of detecting a true margin."),
    ] = None,
) -> None:
    """Compare every pair of judges on the primary endpoint (analysis.primary), Holm-corrected,
    and say, from each pair's own spread between tasks, how many tasks with passing and
    failing candidates it takes to separate them."""
    from pydantic import ValidationError

    from judgelab.analysis.power import power_analysis
    from judgelab.analysis.stats import CIRule, evaluator_stats
    from judgelab.analysis.truth import execution_truth
    from judgelab.config import load_settings
    from judgelab.report.format import fmt_ci
    from judgelab.report.power import HEADER, rows, summary
    from judgelab.schemas import validate_file

    with exit_on_error():
        analysis = load_settings(params).analysis
        overrides = {"alpha": alpha, "power": target}
        try:
            knobs = analysis.power.model_validate(
                analysis.power.model_dump() | {k: v for k, v in overrides.items() if v is not None}
            )
            margin = analysis.margin if margin is None else margin
        except ValidationError as err:
            raise typer.BadParameter(str(err)) from None
        table = validate_file(scores, "scores")
    result = power_analysis(table, execution_truth(table), evaluator_stats(table), knobs,
                            CIRule.of(analysis), analysis.primary, analysis.advantage,
                            margin)  # fmt: skip
    out = Table(title=f"judgelab power: margin {margin:g}, alpha {knobs.alpha:g}, "
                f"power {knobs.power:g}")  # fmt: skip
    for column in HEADER:
        out.add_column(column, overflow="fold")
    for row in rows(result, fmt_ci):
        out.add_row(*row)
    console = Console(width=max(100, Console().width))
    console.print(out)
    console.print(summary(result))
