"""Prefect deployment of the pipeline, and the offline commands that start the local UIs.

- `pipeline_deployment(...)` turns `judgelab.flows.pipeline.pipeline_flow` (tasks -> rollouts ->
  scores -> training -> analysis) into a Prefect deployment on a cron schedule, with the
  params file as its parameter. `serve_deployment(...)` registers
  it with the Prefect server at $PREFECT_API_URL and runs it there until interrupted (Prefect's
  `serve`: the process polls for scheduled or triggered runs and executes each in a
  subprocess).
- `prefect_server_command(port)` / `mlflow_ui_command(port)` return the command and the
  environment that start Prefect's server+UI and MLflow's UI on 127.0.0.1 with every
  state file inside the project (PREFECT_HOME under .cache/, mlflow.db at the root) and
  every phone-home switch off (see judgelab.env).
- `api_url(port)` and `check_api(url)`: where the Prefect API is, and whether it answers.
- `temporary_prefect_server()`: the API server a stage command runs its flow against when
  PREFECT_API_URL is unset. It is the server Prefect would start by itself (uvicorn on
  Prefect's app factory, UI off), but started by judgelab with `die_with_parent`: Prefect's
  own temporary server outlived a `kill -9` of the stage, re-parented to init.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from judgelab.errors import JudgelabError
from judgelab.lifetime import die_with_parent
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


def _drain_prefect_workers(timeout_s: float = 10.0) -> None:
    """Send the run logs and events Prefect still queues to the server before it stops, as
    Prefect's own test harness does: left queued, they are retried against the stopped server
    at interpreter exit, for minutes when a process has run two temporary servers."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=timeout_s, at_exit=False)
    EventsWorker.drain_all(timeout=timeout_s, at_exit=False)


@contextmanager
def temporary_prefect_server(timeout_s: float | None = None) -> Iterator[str]:
    """Start Prefect's API server for this process, yield its URL (set as PREFECT_API_URL
    here and for children), stop it on exit. It dies with this process, even by kill -9."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if timeout_s is None:
        timeout_s = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", 120))
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port = int(sock.getsockname()[1])
    url = api_url(port)
    log_path = cache_dir() / "prefect" / "temporary-server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PREFECT_UI_ENABLED": "0",
        "PREFECT__SERVER_EPHEMERAL": "1",
        "PREFECT__SERVER_FINAL": "1",
    }
    env.pop("PREFECT_API_URL", None)
    import prefect

    args = [
        sys.executable, "-m", "uvicorn", "--app-dir", str(Path(prefect.__file__).parent.parent),
        "--factory", "prefect.server.api.server:create_app", "--host", HOST,
        "--port", str(port), "--log-level", "error", "--lifespan", "on",
    ]  # fmt: skip
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            args, env=env, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches the stage, which stops the server
            preexec_fn=die_with_parent,  # noqa: PLW1509 - only prctl, before any thread runs
        )  # fmt: skip
    try:
        _wait_until_healthy(proc, url, log_path, timeout_s)
        previous = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = url
        try:
            with temporary_settings(updates={PREFECT_API_URL: url}):
                try:
                    yield url
                finally:
                    _drain_prefect_workers()
        finally:
            if previous is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = previous
    finally:
        _stop(proc)


def _wait_until_healthy(
    proc: subprocess.Popen[bytes], url: str, log_path: Path, timeout_s: float
) -> None:
    """Returns once the server answers its health check; raises, naming its log, when it
    exits or stays silent for `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-600:]
            raise JudgelabError(
                f"the temporary Prefect server exited with {proc.returncode}: {tail}"
            )
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise JudgelabError(
                f"the temporary Prefect server did not answer {url}/health within "
                f"{timeout_s:.0f} s (PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS); "
                f"its log: {log_path}"
            )
        time.sleep(0.2)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group, SIGKILL after 10 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


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
    from prefect.types.entrypoint import EntrypointType

    from judgelab.flows.pipeline import pipeline_flow

    return pipeline_flow.to_deployment(
        name=name,
        cron=cron,
        paused=paused,
        parameters={"params": str(params)},
        description="judgelab audit: tasks -> rollouts -> scores -> training -> analysis",
        tags=["judgelab"],
        # The installed `judgelab.flows` package, not a file path: runs find it from any directory.
        entrypoint_type=EntrypointType.MODULE_PATH,
    )


def serve_deployment(deployment: RunnerDeployment, limit: int | None = 1) -> None:
    """Register the deployment and execute its runs until interrupted (blocks)."""
    from prefect import serve

    serve(deployment, limit=limit, print_starting_message=True)
