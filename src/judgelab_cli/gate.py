"""`judgelab gate`: the audit gate (`judgelab.analysis.gate`) on an audit already written.

It reads the metrics.json it is given (the analysis stage's, by default, or the folder
`judgelab audit --out` wrote) and re-runs nothing: a wrong `--judge` is an error at once,
listing the judges there are. One line per gated judge and figure; exit 3 (`EXIT_GATE`) when
any figure's CI lies on the wrong side of its threshold or cannot be placed (unmeasured, or
resting on fewer than `analysis.min_ci_groups` groups), 2 on bad input, 0 otherwise."""

from __future__ import annotations

from pathlib import Path

import typer

from judgelab.errors import EXIT_GATE, ConfigError
from judgelab.flows.paths import ANALYSIS
from judgelab_cli.errors import exit_on_error

METRICS = typer.Option(
    ANALYSIS / "metrics.json",
    "--metrics",
    "-m",
    help="The audit to gate: its metrics.json, or the folder holding it (judgelab audit --out).",
)
FAIL_BELOW = typer.Option(
    None,
    "--fail-below",
    help="Refuse a judge whose primary (analysis.primary, on its own scale: signal fidelity is "
    "1 for the tests, about 0.1 for the reference audit's best LLM judge) has its whole 95 % "
    "CI below this.",
)
FAIL_ABOVE_PRAISE_WITHIN_GROUP = typer.Option(
    None,
    "--fail-above-praise-within-group",
    help="Refuse a judge whose false_praise_within_group (failing candidates of mixed tasks "
    "scored at or above a passing one of their task) has its whole 95 % CI above this.",
)
FAIL_ABOVE_PRAISE_ABSOLUTE = typer.Option(
    None,
    "--fail-above-praise-absolute",
    help="Refuse a judge whose false_praise_absolute (failing candidates scored at or above "
    "analysis.praise_threshold) has its whole 95 % CI above this.",
)
JUDGES = typer.Option(
    [],
    "--judge",
    help="A judge to gate (repeat the flag for several); default: every evaluator audited "
    "against the truth.",
)


def gate(
    metrics: Path = METRICS,
    fail_below: float | None = FAIL_BELOW,
    fail_above_praise_within_group: float | None = FAIL_ABOVE_PRAISE_WITHIN_GROUP,
    fail_above_praise_absolute: float | None = FAIL_ABOVE_PRAISE_ABSOLUTE,
    judge: list[str] = JUDGES,
) -> None:
    """Refuse a judge whose audit says not to train on it (CIs, not point estimates)."""
    from judgelab.analysis import gate as audit_gate

    with exit_on_error():
        rule = audit_gate.Gate(
            fail_below, fail_above_praise_within_group, fail_above_praise_absolute, tuple(judge)
        )
        if not rule.active:
            raise ConfigError(
                "judgelab gate: no threshold given; give --fail-below, "
                "--fail-above-praise-within-group or --fail-above-praise-absolute"
            )
        findings = audit_gate.check_file(metrics, rule)
    for f in findings:
        if f.refused:
            typer.secho(f"gate: refused: {f.message()}", fg="red", err=True)
        else:
            typer.echo(f"gate: {f.outcome}: {f.message()}", err=True)
    if any(f.refused for f in findings):
        raise typer.Exit(EXIT_GATE)
    typer.echo("gate: every gated judge passed", err=True)
