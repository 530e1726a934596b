"""`judgelab probes [--fail-above T]`: the probe stage, then the attack gate.

The stage runs as every stage does (`stages.run`); with a threshold (the flag, else
``probes.fail_above``) `judgelab.probes.gate.check` reads the metrics it wrote, and every judge
and attack it refuses is one red line on stderr; then the command exits with
`gate.EXIT_CODE` (3). A threshold with nothing to gate is a configuration error (exit 2)
before the stage starts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import typer

from flows.stages import PROBES_METRICS, Stage
from judgelab_cli.errors import exit_on_error
from judgelab_cli.stages import PARAMS, run

FAIL_ABOVE = typer.Option(
    None,
    "--fail-above",
    min=0.0,
    max=1.0,
    help="Gate: exit with code 3, naming judge and attack, when a judge's success rate for an "
    "attack on failing code (probes.attacks) exceeds this, or cannot be measured. Overrides "
    "probes.fail_above.",
)


def command(stage: Stage) -> Callable[..., None]:
    def probe(params: Path = PARAMS, fail_above: float | None = FAIL_ABOVE) -> None:
        from judgelab.config import load_settings
        from judgelab.probes import gate

        with exit_on_error():  # before the flow: a gate with nothing to gate is an error
            limit = gate.threshold(load_settings(params).probes, fail_above)
        run(stage, params)
        if limit is None:
            return
        with exit_on_error():
            violations = gate.check_file(PROBES_METRICS, limit)
        for v in violations:
            typer.secho(f"gate: {v.message()}", fg="red", err=True)
        if violations:
            raise typer.Exit(gate.EXIT_CODE)
        typer.echo(f"gate: no attack success rate above {limit}", err=True)

    return probe
