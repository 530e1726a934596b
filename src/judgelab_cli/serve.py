"""`judgelab serve`: register the pipeline as a Prefect deployment on a cron schedule and run
its flow runs (scheduled, or triggered from the Prefect UI) until interrupted."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from judgelab_cli.deploy import DEFAULT_CRON, DEFAULT_DEPLOYMENT, PREFECT_PORT, api_url, check_api
from judgelab_cli.errors import exit_on_error


def serve(
    cron: Annotated[
        str, typer.Option(help="Cron schedule (server time zone: UTC); '' for on-demand only.")
    ] = DEFAULT_CRON,
    name: Annotated[str, typer.Option(help="Deployment name.")] = DEFAULT_DEPLOYMENT,
    params: Annotated[
        Path, typer.Option("--params", "-p", help="Parameters file the runs use.")
    ] = Path("params.yaml"),
    paused: Annotated[bool, typer.Option(help="Register with the schedule paused.")] = False,
    limit: Annotated[int, typer.Option(min=1, help="Flow runs executed at once.")] = 1,
) -> None:
    """Serve the pipeline as Prefect deployment `judgelab-pipeline/NAME` on a cron schedule.

    Needs a Prefect server: $PREFECT_API_URL, else the local one that `judgelab ui prefect`
    starts on 127.0.0.1. Trigger a run from the UI or with `prefect deployment run
    judgelab-pipeline/NAME`; this process executes it and stays up until Ctrl-C.
    """
    from judgelab.config import load_settings
    from judgelab.extras import require

    with exit_on_error():  # a missing or invalid params file fails now, not every run
        require("pipeline", "judgelab serve (a Prefect deployment)")
        load_settings(params)
    url = os.environ.setdefault("PREFECT_API_URL", api_url(PREFECT_PORT))
    with exit_on_error():
        check_api(url)
        from judgelab_cli.deploy import pipeline_deployment, serve_deployment

        deployment = pipeline_deployment(name, cron or None, params, paused)
        typer.echo(f"serving judgelab-pipeline/{name} (cron {cron or 'none'!s}) on {url}")
        serve_deployment(deployment, limit=limit)
