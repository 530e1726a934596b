"""One command per stage of the stage table (judgelab.flows.stages): `judgelab tasks|rollouts|
scores|training|analysis|probes|pipeline`. Each checks its inputs in a second, then runs its flow.

`judgelab probes [--fail-above T]` then applies the attack gate: with a threshold (the flag,
else ``probes.fail_above``) `judgelab.probes.gate.check` reads the metrics the stage wrote,
every judge and attack it refuses is one red line on stderr, and the command exits with
`gate.EXIT_CODE` (3). A threshold with nothing to gate is a configuration error (exit 2)
before the stage starts.

The audit gate is a command of its own, `judgelab gate` (`judgelab_cli.gate`): it reads
an audit already written and re-runs no stage. The exit codes: `judgelab.errors.EXIT_CODES`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from judgelab.errors import EXIT_GATE
from judgelab.extras import require
from judgelab.flows.paths import PROBES_METRICS
from judgelab.flows.stages import STAGES, Stage
from judgelab_cli.errors import exit_on_error

PARAMS = typer.Option(Path("params.yaml"), "--params", "-p", help="Parameters file.")
REANALYSE = typer.Option(
    False,
    "--reanalyse",
    help="Recompute the figures, plots and report from the probe tables already in "
    "data/probes, calling no model (after an upgrade of judgelab's analysis).",
)
FAIL_ABOVE = typer.Option(
    None,
    "--fail-above",
    min=0.0,
    max=1.0,
    help="Gate: exit with code 3, naming judge and attack, when a judge's success rate for an "
    "attack on failing code (probes.attacks) exceeds this, or cannot be measured. Overrides "
    "probes.fail_above.",
)


# One line per HTTP request (httpx) and LiteLLM's banners drowned a run's log (about 600 of
# its 630 lines); they show with `judgelab -v`.
CHATTY_LOGGERS = ("httpx", "httpcore", "LiteLLM", "litellm")


class QuietLibraries(logging.Filter):
    """Drops the chatty libraries' records below WARNING. A handler filter, not a logger
    level: litellm sets its loggers' levels itself when it is imported."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.name.startswith(CHATTY_LOGGERS)


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if os.environ.get("JUDGELAB_VERBOSE") != "1":
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, QuietLibraries) for f in handler.filters):
                handler.addFilter(QuietLibraries())


def preflight(stage: Stage, params: Path) -> None:
    """Fail in a second, before any flow or model starts, on what would fail the stage later:
    invalid params, a model whose API-key variable is unset, an input table with bad rows.
    Nothing is written, so no partial artefact can look complete."""
    from judgelab.config import EndpointModel, load_settings
    from judgelab.errors import ConfigError
    from judgelab.schemas import validate_file

    settings = load_settings(params)
    if stage.check is not None:
        stage.check(settings)
    for name in dict.fromkeys(stage.models(settings)):
        spec = settings.model(name)
        if isinstance(spec, EndpointModel):
            try:
                spec.api_key(name)
            except ConfigError as err:
                raise ConfigError(f"{err} (the {stage.name} stage needs model {name!r})") from None
    for path, kind in stage.tables():
        validate_file(path, kind)


def run(stage: Stage, params: Path) -> None:
    configure_logging()
    with exit_on_error():
        require("pipeline", f"judgelab {stage.command} (a Prefect flow)")
        preflight(stage, params)
        flow = stage.flow()
        from judgelab_cli.deploy import temporary_prefect_server

        # the user's server if PREFECT_API_URL names one, else ours: it ends with this
        # process, even by kill -9
        user_server = bool(os.environ.get("PREFECT_API_URL"))
        from judgelab.config import load_settings
        from judgelab.flows.fanout import task_runner

        runner = task_runner(load_settings(params).runner)  # params.yaml `runner:`
        with contextlib.nullcontext() if user_server else temporary_prefect_server():
            flow.with_options(task_runner=runner)(params=params)


def command(stage: Stage) -> Callable[[Path], None]:
    def run_stage(params: Path = PARAMS) -> None:
        run(stage, params)

    return run_stage


def refuse(violations: Sequence[Any], passed: str) -> None:
    """A gate's verdict: one red line per violation and exit `EXIT_GATE`, else `passed`."""
    for v in violations:
        typer.secho(f"gate: {v.message()}", fg="red", err=True)
    if violations:
        raise typer.Exit(EXIT_GATE)
    typer.echo(f"gate: {passed}", err=True)


def gated_command(stage: Stage) -> Callable[..., None]:
    """The probes stage's command: the stage, then the attack gate (module docstring)."""

    def probes(
        params: Path = PARAMS, fail_above: float | None = FAIL_ABOVE, reanalyse: bool = REANALYSE
    ) -> None:
        from judgelab.config import load_settings
        from judgelab.probes import gate

        with exit_on_error():  # before the flow: a gate with nothing to gate is an error
            limit = gate.threshold(load_settings(params).probes, fail_above)
        if reanalyse:
            configure_logging()
            with exit_on_error():
                require("pipeline", "judgelab probes --reanalyse (a Prefect flow)")
                from judgelab.flows.probe import reanalyse as reanalyse_tables

                reanalyse_tables(params)
        else:
            run(stage, params)
        if limit is None:
            return
        with exit_on_error():
            violations = gate.check_file(PROBES_METRICS, limit)
        refuse(violations, f"no attack success rate above {limit}")

    return probes


def register(app: typer.Typer) -> None:
    for stage in STAGES:
        make = gated_command if stage.name == "probes" else command
        app.command(stage.command, help=stage.help)(make(stage))
