"""Prefect deployment of the pipeline, and the offline commands that start the local UIs.

- `pipeline_deployment(...)` turns `flows.pipeline.pipeline_flow` into a Prefect deployment
  on a cron schedule, with the params file as its parameter. `serve_deployment(...)` registers
  it with the Prefect server at $PREFECT_API_URL and runs it there until interrupted (Prefect's
  `serve`: the process polls for scheduled or triggered runs and executes each in a
  subprocess).
- `prefect_server_command(port)` / `mlflow_ui_command(port)` return the command and the
  environment that start Prefect's server+UI and MLflow's UI on 127.0.0.1 with every
  state file inside the project (PREFECT_HOME under .cache/, mlflow.db at the root) and
  every phone-home switch off (see judgelab.env).
- `api_url(port)` and `check_api(url)`: where the Prefect API is, and whether it answers.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from judgelab.errors import JudgelabError
from judgelab.paths import cache_dir, project_root

if TYPE_CHECKING:
    from prefect.deployments.runner import RunnerDeployment

DEFAULT_CRON = "0 3 * * *"  # every night at 03:00
DEFAULT_DEPLOYMENT = "nightly"
PREFECT_PORT = 4200
MLFLOW_PORT = 5000
HOST = "127.0.0.1"


def api_url(port: int = PREFECT_PORT) -> str:
    return f"http://{HOST}:{port}/api"


def check_api(url: str, timeout_s: float = 5.0) -> None:
    """Raise a JudgelabError naming the start command unless the Prefect API is healthy."""
    try:
        reply = httpx.get(f"{url.rstrip('/')}/health", timeout=timeout_s)
        reply.raise_for_status()
    except httpx.HTTPError as err:
        raise JudgelabError(
            f"no Prefect server at {url} ({err.__class__.__name__}: {err}); start one with "
            "`judgelab ui prefect` (or set PREFECT_API_URL)"
        ) from None


def _bin(name: str) -> str:
    """The tool next to this interpreter (the venv), else on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else (shutil.which(name) or name)


def prefect_server_command(port: int = PREFECT_PORT) -> tuple[list[str], dict[str, str]]:
    """`prefect server start` on 127.0.0.1:port, state in .cache/prefect, analytics off."""
    env = dict(os.environ)
    env.update(
        PREFECT_SERVER_API_HOST=HOST,
        # The UI reads its API address from this, not from --port.
        PREFECT_SERVER_API_PORT=str(port),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT="false",
        DO_NOT_TRACK="true",
    )
    env.setdefault("PREFECT_HOME", str(cache_dir() / "prefect"))
    # A client setting that points elsewhere would make the server's UI talk to that API.
    env.pop("PREFECT_API_URL", None)
    env.pop("PREFECT_UI_API_URL", None)
    Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    return [_bin("prefect"), "server", "start", "--host", HOST, "--port", str(port)], env


def mlflow_ui_command(port: int = MLFLOW_PORT) -> tuple[list[str], dict[str, str]]:
    """`mlflow ui` on 127.0.0.1:port over the project's mlflow.db, telemetry off."""
    env = dict(os.environ)
    env.update(
        MLFLOW_DISABLE_TELEMETRY="true",
        DO_NOT_TRACK="true",
        MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
    )
    store = f"sqlite:///{project_root() / 'mlflow.db'}"
    cmd = [_bin("mlflow"), "ui", "--backend-store-uri", store, "--host", HOST, "--port", str(port)]
    return cmd + ["--workers", "1"], env


def pipeline_deployment(
    name: str = DEFAULT_DEPLOYMENT,
    cron: str | None = DEFAULT_CRON,
    params: Path = Path("params.yaml"),
    paused: bool = False,
) -> RunnerDeployment:
    """The pipeline flow as a deployment: `cron` schedule (None: run on demand only)."""
    from flows.pipeline import pipeline_flow
    from prefect.types.entrypoint import EntrypointType

    return pipeline_flow.to_deployment(
        name=name,
        cron=cron,
        paused=paused,
        parameters={"params": str(params)},
        description="judgelab audit: tasks -> rollouts -> scores -> analysis",
        tags=["judgelab"],
        # The installed `flows` package, not a file path: runs find it from any directory.
        entrypoint_type=EntrypointType.MODULE_PATH,
    )


def serve_deployment(deployment: RunnerDeployment, limit: int | None = 1) -> None:
    """Register the deployment and execute its runs until interrupted (blocks)."""
    from prefect import serve

    serve(deployment, limit=limit, print_starting_message=True)
