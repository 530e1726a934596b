"""kill -9 the real pipeline mid-rollouts, then mid-scores, then let it finish: the final
tables equal an uninterrupted computation, with no row lost or duplicated, and the
resumed runs ask the models only for what was never answered.

The models are a loopback server speaking the OpenAI wire format (policy and judges are
`kind: endpoint` models in the scratch project's params.yaml), so the test is about
judgelab's own crash safety — caches, atomic writes — and stays fast. The server answers
deterministically from each request's content, and can be told to hang, which is when the
pipeline is killed (with its whole process group). The kill -9 test runs its flows against the
test session's Prefect server; the test of a stage's own temporary server kills the stage
alone and checks that server ends with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from judgelab.cache import JsonCache
from judgelab.config import parse_settings
from judgelab.evaluators.registry import build_evaluator
from judgelab.models.server import remote_endpoint
from judgelab.rollouts.generate import candidates_by_task, generate_group, rollouts_frame
from judgelab.schemas import validate_file
from judgelab.scoring import run_id_for, score_group, scores_frame
from judgelab.tasks import tasks_from_frame
from support.openai_server import OpenAIServer, Reply, ok
from support.scratch import scratch_env

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.integration

TIMING = ["latency_s"]  # the only columns allowed to differ between runs


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def model_reply(body: dict[str, Any]) -> Reply:
    """Deterministic answers: the policy writes code from its seed; judges score by hash."""
    user = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    if "response_format" not in body:  # the policy
        n = _h(f"{user}|{body.get('seed')}") % 3
        code = ["def f():\n    return 1", "def f(:\n    oops", "import sys\nsys.exit(3)"][n]
        return ok(f"<request>r</request>\n<language>Python</language>\n<code>\n{code}\n</code>")
    ids = re.findall(r'<trajectory id="(\d+)">', user)
    if ids:  # RULER
        scores = [{"trajectory_id": t, "explanation": "e", "score": _h(user + t) % 11 / 10}
                  for t in ids]  # fmt: skip
        return ok(json.dumps({"scores": scores}))
    return ok(json.dumps({"explanation": "e", "score": _h(user) % 11 / 10}))  # rubric


class Gate:
    """Lets `allowed` requests of a kind through, then hangs the rest until opened."""

    def __init__(self) -> None:
        self.kind: str | None = None
        self.allowed = 0
        self.seen = {"policy": 0, "judge": 0}
        self.bodies: list[str] = []  # judge requests in the order they arrived
        self.policy_bodies: list[str] = []  # policy requests in the order they arrived
        self.last = time.monotonic()  # when the latest request arrived
        self.opened = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        if "messages" not in body:  # headers sent, body cut off by the kill: no one to answer
            return {"status": 400, "text": "no body"}
        kind = "judge" if "response_format" in body else "policy"
        with self.lock:
            self.seen[kind] += 1
            self.last = time.monotonic()
            (self.bodies if kind == "judge" else self.policy_bodies).append(
                json.dumps(body, sort_keys=True))  # fmt: skip
            hold = kind == self.kind and self.seen[kind] > self.allowed
        if hold:
            self.opened.wait(120)
        return model_reply(body)


def params(base_url: str) -> dict[str, Any]:
    # Four calls in flight per model, as an endpoint has by default.
    model = {"kind": "endpoint", "base_url": base_url, "structured_output": "json_object",
             "timeout_s": 300, "max_concurrency": 4}  # fmt: skip
    return {
        "models": {"pol": {**model, "model": "pol"}, "jud": {**model, "model": "jud"}},
        "tasks": {
            "humaneval": {"enabled": True, "offset": 0, "limit": 3},
            "autorl": {"enabled": False, "model": "pol"},
        },  # fmt: skip
        "rollouts": {"policy": "pol", "k": 3},
        "scores": {
            "evaluators": [
                {"name": "format", "kind": "format"},
                {"name": "execution", "kind": "execution", "timeout_s": 10},
                {"name": "ruler-jud", "kind": "ruler", "judge": "jud"},
                {"name": "rubric-jud", "kind": "rubric", "judge": "jud"},
            ]
        },
        "analysis": {"bootstrap": 50},
        "tracking": {"enabled": False},
    }


def pipeline(project: Path, own_prefect: bool = False) -> subprocess.Popen[bytes]:
    """`judgelab pipeline` in its own process group. It runs its flows against the test
    session's Prefect server (about 12 s saved a run on a 2-core AVX2 EPYC), or, with
    `own_prefect`, against the temporary server a command starts when none is set."""
    if own_prefect:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_", "MLFLOW_", "JUDGELAB_"))}  # fmt: skip
        env.update(JUDGELAB_ROOT=str(project), PYTHONPATH=str(ROOT))
    else:
        env = scratch_env(project, PYTHONPATH=str(ROOT))
    return subprocess.Popen(
        [str(BIN / "judgelab"), "pipeline"], cwd=project, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=open(project / "stderr.log", "ab"),  # noqa: SIM115
    )  # fmt: skip


CACHES = {"policy": "completions", "judge": "judge"}


def cached(project: Path, kind: str) -> int:
    return len(list((project / ".cache" / CACHES[kind]).rglob("*.json")))


def kill_when(project: Path, proc: subprocess.Popen[bytes], gate: Gate, kind: str, n: int) -> None:
    """Kill once the n answers let through are stored and a further request hangs. With calls
    in flight together, an answer can reach the client a moment before it is cached: waiting
    for the cache makes what "finished" means exact."""
    deadline = time.monotonic() + 400
    while (gate.seen[kind] <= n or cached(project, kind) < n) and proc.poll() is None:
        assert time.monotonic() < deadline, "the pipeline never got that far"
        time.sleep(0.05)
    assert proc.poll() is None, "the pipeline ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    # Requests the killed client had already sent can reach the gate a moment later; let
    # them arrive now, so that they are not counted as the next run's.
    while time.monotonic() - gate.last < 1.0:
        time.sleep(0.05)


def test_kill_9_mid_rollouts_and_mid_scores_then_resume(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    gate = Gate()
    with OpenAIServer(gate) as server:
        p = params(server.base_url)
        (project / "params.yaml").write_text(yaml.safe_dump(p))
        data = project / "data"

        gate.kind, gate.allowed = "policy", 4  # 3 tasks x k=3 = 9 samples; hang at the 5th
        kill_when(project, pipeline(project), gate, "policy", 4)
        assert not (data / "rollouts" / "rollouts.parquet").exists()  # no partial table
        assert cached(project, "policy") == 4  # the hung calls stored nothing
        answered_policy = set(gate.policy_bodies[:4])

        gate.opened.set()
        gate.opened = threading.Event()
        gate.seen = {"policy": 0, "judge": 0}
        gate.policy_bodies = []
        gate.kind, gate.allowed = "judge", 5
        kill_when(project, pipeline(project), gate, "judge", 5)
        asked = gate.policy_bodies
        assert not answered_policy & set(asked), "resumed rollouts asked for a stored answer"
        assert len(set(asked)) == 5, "resumed rollouts must ask for each of the 5 missing"
        assert len(asked) == 5, "resumed rollouts asked again for something"
        assert (data / "rollouts" / "rollouts.parquet").exists()
        assert not (data / "scores" / "scores.parquet").exists()

        assert cached(project, "judge") == 5
        answered = set(gate.bodies[:5])  # the later ones hung until the kill
        gate.opened.set()
        gate.seen, gate.bodies = {"policy": 0, "judge": 0}, []
        gate.kind = None
        done = pipeline(project)
        assert done.wait(600) == 0, (project / "stderr.log").read_text()[-5000:]
        assert gate.seen["policy"] == 0
        # only what was never answered: no request again, none twice
        assert gate.bodies and not answered & set(gate.bodies)
        assert len(set(gate.bodies)) == len(gate.bodies)

        settings = parse_settings(p)
        tasks = validate_file(data / "tasks" / "tasks.parquet", "tasks")
        rollouts = validate_file(data / "rollouts" / "rollouts.parquet", "rollouts")
        scores = validate_file(data / "scores" / "scores.parquet", "scores")
        assert json.loads((data / "analysis" / "metrics.json").read_text())["evaluators"]

        # the same computation, uninterrupted, on fresh caches
        clean = tmp_path / "clean-cache"
        policy = remote_endpoint("pol", settings.models["pol"])  # type: ignore[arg-type]
        clean_rollouts = rollouts_frame([
            row for t in tasks_from_frame(tasks)
            for row in generate_group(settings.rollouts, t, policy, JsonCache(clean, "c"))
        ])  # fmt: skip
        endpoints = {"jud": remote_endpoint("jud", settings.models["jud"])}  # type: ignore[arg-type]
        groups = candidates_by_task(clean_rollouts)
        run_id = run_id_for(settings, clean_rollouts)
        rows = []
        for spec in settings.scores.evaluators:
            ev = build_evaluator(spec, endpoints, JsonCache(clean, "judge"))
            for t in tasks_from_frame(tasks):
                rows += score_group(run_id, ev, t, groups[t.task_id], 0)
        clean_scores = scores_frame(rows)

    assert rollouts.height == 9 and scores.height == 4 * 9
    assert rollouts.drop(TIMING).equals(clean_rollouts.drop(TIMING))
    assert scores.drop(TIMING).equals(clean_scores.drop(TIMING))
    keys = ["evaluator", "candidate_id", "repeat"]
    assert scores.select(keys).is_unique().all()  # nothing duplicated
    assert set(scores["status"]) <= {"scored", "unscored"}
    execution = scores.filter(pl.col("evaluator") == "execution")
    assert execution.height == 9 and (execution["status"] == "scored").all()


def _descendants(pid: int) -> dict[int, str]:
    """Live descendants of `pid`: {pid: command line}."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found: dict[int, str] = {}
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        try:
            cmdline = (Path("/proc") / str(p) / "cmdline").read_bytes()
            found[p] = cmdline.replace(b"\0", b" ").decode()
        except OSError:
            continue
        todo += children.get(p, [])
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_kill_9_of_a_stage_leaves_no_process_behind(tmp_path: Path) -> None:
    """Only the stage process is killed (not its group, as a crash or the OOM killer would):
    its temporary Prefect server must end with it, as the model server does."""
    project = tmp_path / "project"
    project.mkdir()
    gate = Gate()
    with OpenAIServer(gate) as server:
        (project / "params.yaml").write_text(yaml.safe_dump(params(server.base_url)))
        gate.kind, gate.allowed = "policy", 1  # the rollouts hang at the 2nd sample
        proc = pipeline(project, own_prefect=True)
        try:
            deadline = time.monotonic() + 300
            while gate.seen["policy"] <= 1 and proc.poll() is None:
                assert time.monotonic() < deadline, "the pipeline never reached the rollouts"
                time.sleep(0.05)
            assert proc.poll() is None, (project / "stderr.log").read_text()[-3000:]
            left = _descendants(proc.pid)
            assert any("prefect.server.api.server:create_app" in c for c in left.values()), left
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            deadline = time.monotonic() + 15
            while any(_alive(p) for p in left) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not [c for p, c in left.items() if _alive(p)]
        finally:
            gate.opened.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
