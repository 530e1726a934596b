"""typer entry point. Sub-commands live one per module and are registered here."""

from __future__ import annotations

import os

import typer

from judgelab.env import configure_offline_env

configure_offline_env()

app = typer.Typer(
    name="judgelab",
    help="Audit the evaluators (LLM judges, rubrics, tests) used as rewards for code RL.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    from judgelab_cli import (
        audit,
        checkpoint,
        doctor,
        gate,
        models,
        power,
        sandbox,
        selftest,
        serve,
        stages,
        study,
        ui,
        validate,
    )

    stages.register(app)
    app.command()(audit.audit)
    app.command()(serve.serve)
    app.command()(doctor.doctor)
    app.command()(gate.gate)
    app.command()(power.power)
    app.command()(selftest.selftest)
    app.command()(study.study)
    app.add_typer(ui.app, name="ui")
    app.add_typer(validate.app, name="validate")
    app.add_typer(models.app, name="models")
    app.add_typer(sandbox.app, name="sandbox")
    app.add_typer(checkpoint.app, name="checkpoint")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"judgelab {version('judgelab')}")
        raise typer.Exit()


@app.callback()
def main(
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Show library chatter too (HTTP requests, LiteLLM)."
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Audit the evaluators (LLM judges, rubrics, tests) used as rewards for code RL."""
    if verbose:
        os.environ["JUDGELAB_VERBOSE"] = "1"


_register()
