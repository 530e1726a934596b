"""One command per stage of the stage table (flows.stages): `judgelab tasks|rollouts|scores|
training|analysis|probes|pipeline`, and each stage's former names as hidden aliases
(`judgelab train`). Each checks its inputs in a second, then runs its flow."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

import typer

from flows.stages import PROBES_STAGE, STAGES, Stage
from judgelab_cli.errors import exit_on_error

PARAMS = typer.Option(Path("params.yaml"), "--params", "-p", help="Parameters file.")


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
        preflight(stage, params)
        flow = stage.flow()
        from judgelab_cli.deploy import temporary_prefect_server

        # the user's server if PREFECT_API_URL names one, else ours: it ends with this
        # process, even by kill -9
        user_server = bool(os.environ.get("PREFECT_API_URL"))
        from flows.fanout import task_runner
        from judgelab.config import load_settings

        runner = task_runner(load_settings(params).runner)  # params.yaml `runner:`
        with contextlib.nullcontext() if user_server else temporary_prefect_server():
            flow.with_options(task_runner=runner)(params=params)


def command(stage: Stage) -> Callable[[Path], None]:
    def run_stage(params: Path = PARAMS) -> None:
        run(stage, params)

    return run_stage


def register(app: typer.Typer) -> None:
    from judgelab_cli import probe

    for stage in STAGES:
        make = probe.command if stage is PROBES_STAGE else command  # + the attack gate
        app.command(stage.command, help=stage.help)(make(stage))
        for alias in stage.aliases:  # old scripts keep working; --help shows one name
            former = f"{stage.help} Former name of `judgelab {stage.command}`."
            app.command(alias, help=former, hidden=True)(make(stage))
