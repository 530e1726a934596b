"""`judgelab serve` + the Prefect server from `judgelab ui prefect`, for real, on loopback.

A scratch project (cheap config: 2 HumanEval tasks, k=2, a loopback policy endpoint so no
llama.cpp process is needed, rule and execution evaluators) is served as a deployment on a
cron schedule. The test triggers a run through the Prefect API, waits for its final state,
then reads the pipeline's MLflow runs back with MlflowClient.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from judgelab.config import parse_settings
from support.openai_server import OpenAIServer
from support.scratch import scratch_env
from tests.support.browser import headless

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.integration

# Passes HumanEval/0 (has_close_elements), fails HumanEval/1: truth has both labels.
ANSWER = """<request>{request}</request>
<language>Python</language>
<code>
def has_close_elements(numbers, threshold):
    return any(abs(a - b) < threshold for i, a in enumerate(numbers)
               for j, b in enumerate(numbers) if i != j)

def separate_paren_groups(paren_string):
    return []
</code>"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scratch_params(base_url: str) -> dict[str, Any]:
    p = {
        "models": {
            "stub-policy": {"kind": "endpoint", "base_url": base_url, "model": "stub"},
        },
        "tasks": {
            "humaneval": {"offset": 0, "limit": 2},
            "autorl": {"enabled": False, "model": "stub-policy"},
        },
        "rollouts": {"policy": "stub-policy", "k": 2, "max_tokens": 64},
        "scores": {
            "evaluators": [
                {"name": "format", "kind": "format"},
                {"name": "syntax", "kind": "syntax"},
                {"name": "execution", "kind": "execution", "timeout_s": 10},
            ]
        },
        "analysis": {"bootstrap": 50},
        "tracking": {"enabled": True, "experiment": "scratch-project"},
    }
    parse_settings(p)  # the test's own params must be valid
    return p


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def wait_until(check: Any, timeout_s: float, what: str, proc: subprocess.Popen[bytes]) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        if proc.poll() is not None:
            pytest.fail(f"{what}: process exited with {proc.returncode}")
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {timeout_s:.0f}s")


@pytest.fixture(scope="module")
def policy() -> Iterator[OpenAIServer]:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return {"content": ANSWER.format(request="task")}

    with OpenAIServer(reply) as server:
        yield server


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, policy: OpenAIServer) -> Path:
    proj = tmp_path_factory.mktemp("served")
    (proj / "params.yaml").write_text(yaml.safe_dump(scratch_params(policy.base_url)))
    return proj


@pytest.fixture(scope="module")
def env(project: Path) -> dict[str, str]:
    return scratch_env(project, JUDGELAB_PROGRESS="0")


@pytest.fixture(scope="module")
def prefect_api(project: Path, env: dict[str, str], tmp_path_factory: pytest.TempPathFactory):
    """The documented command, `judgelab ui prefect`, on a free loopback port."""
    port = free_port()
    log = (tmp_path_factory.mktemp("logs") / "prefect-server.log").open("wb")
    proc = subprocess.Popen(
        [str(BIN / "judgelab"), "ui", "prefect", "--port", str(port)],
        cwd=project,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/api"

    def healthy() -> bool:
        try:
            return httpx.get(f"{url}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(healthy, 180, "prefect server health", proc)
        yield url
    finally:
        stop(proc)
        log.close()


@pytest.fixture(scope="module")
def served(project: Path, env: dict[str, str], prefect_api: str, tmp_path_factory):
    """`judgelab serve` registered against the server; yields the deployment as the API
    returns it."""
    log_path = tmp_path_factory.mktemp("logs") / "serve.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [str(BIN / "judgelab"), "serve", "--cron", "0 3 * * *", "--name", "scratch"],
        cwd=project,
        env={**env, "PREFECT_API_URL": prefect_api},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def deployment() -> dict[str, Any] | None:
        r = httpx.get(f"{prefect_api}/deployments/name/judgelab-pipeline/scratch", timeout=5)
        return r.json() if r.status_code == 200 else None

    try:
        yield wait_until(deployment, 180, "deployment registered", proc), proc, log_path
    finally:
        stop(proc)
        log.close()


@pytest.fixture(scope="module")
def finished_run(served: Any, prefect_api: str) -> dict[str, Any]:
    dep, proc, log_path = served
    url = f"{prefect_api}/deployments/{dep['id']}/create_flow_run"
    for _ in range(10):  # a loaded server answers 503 while its sqlite DB is busy; retry as
        r = httpx.post(url, json={}, timeout=10)  # Prefect's own client does
        if r.status_code != 503:
            break
        time.sleep(3)
    r.raise_for_status()
    run_id = r.json()["id"]

    def final() -> dict[str, Any] | None:
        run = httpx.get(f"{prefect_api}/flow_runs/{run_id}", timeout=5).json()
        return run if run["state"]["type"] in ("COMPLETED", "FAILED", "CRASHED") else None

    run = wait_until(final, 300, "flow run final state", proc)
    assert run["state"]["type"] == "COMPLETED", log_path.read_text()[-4000:]
    return run


def test_deployment_has_cron_schedule_and_params(served: Any) -> None:
    dep = served[0]
    assert dep["entrypoint"] == "judgelab.flows.pipeline.pipeline_flow"
    assert dep["parameters"] == {"params": "params.yaml"}
    crons = [s["schedule"].get("cron") for s in dep["schedules"]]
    assert crons == ["0 3 * * *"]
    assert all(s["active"] for s in dep["schedules"])


def test_triggered_run_completes_with_its_stage_subflows(
    finished_run: dict[str, Any], prefect_api: str, project: Path
) -> None:
    assert finished_run["state"]["name"] == "Completed"
    runs = httpx.post(
        f"{prefect_api}/flow_runs/filter",
        json={"flow_runs": {"parent_task_run_id": {"is_null_": False}}},
        timeout=10,
    ).json()
    flows = httpx.post(f"{prefect_api}/flows/filter", json={}, timeout=10).json()
    names = {f["id"]: f["name"] for f in flows}
    sub = sorted(names[r["flow_id"]] for r in runs if r["state"]["type"] == "COMPLETED")
    assert sub == [
        "judgelab-analysis",
        "judgelab-rollouts",
        "judgelab-scores",
        "judgelab-tasks",
        "judgelab-training",  # nothing to train here (train.rewards is empty)
    ]
    assert (project / "data/analysis/report.html").is_file()


def test_mlflow_runs_read_back(finished_run: dict[str, Any], project: Path) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    exp = client.get_experiment_by_name("scratch-project")
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("judgelab.kind") == "pipeline"]
    assert len(parents) == 1
    parent = parents[0]
    version = hashlib.md5((project / "data/scores/scores.parquet").read_bytes()).hexdigest()[:12]
    assert parent.data.tags["data_version"] == version
    children = {r.data.tags["evaluator"]: r for r in runs if r.info.run_id != parent.info.run_id}
    assert sorted(children) == ["execution", "format", "syntax"]
    for name, child in children.items():
        tags = child.data.tags
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert tags["protocol"] == name
        assert tags["policy"] == "stub-policy"
        assert tags["data_version"] == version
        assert "judge" in tags
        assert child.info.status == "FINISHED"
    # execution truth: HumanEval/0 passes, HumanEval/1 fails -> the rule judges get a ROC-AUC
    assert children["format"].data.metrics["n_rows"] == 4
    assert parent.data.params["policy"] == "stub-policy"


def test_prefect_ui_shows_the_run_offline(
    chromium: str, finished_run: dict[str, Any], prefect_api: str
) -> None:
    """The UI the documented command serves renders the run with every other host cut off."""
    ui = prefect_api.removesuffix("/api")
    proc = headless(
        chromium,
        "--dump-dom",
        f"{ui}/runs/flow-run/{finished_run['id']}",
        resolve_only="127.0.0.1",
        budget_ms=20000,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert finished_run["name"] in proc.stdout
    assert "Completed" in proc.stdout
