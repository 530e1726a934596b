"""The judge cache survives a kill -9 inside a group: a rerun calls only what is missing."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.openai_server import OpenAIServer, Reply, ok

ROOT = Path(__file__).resolve().parents[2]
# This checkout's code, not whichever checkout the environment has installed.
PYTHONPATH = os.pathsep.join([str(ROOT / "src"), str(ROOT)])

SCRIPT = """
import json, sys
from pathlib import Path
from judgelab.cache import JsonCache
from judgelab.evaluators.registry import build_evaluator
from judgelab.config.evaluators import RubricSettings
from judgelab.models.endpoint import Endpoint
from judgelab.models.ratelimit import Limits
from judgelab.scoring import score_group
from judgelab.verdicts import Candidate, Task

task = Task(task_id="t0", source="autorl", request="add two numbers", prompt="add two numbers")
code = "<code>def add(a, b):\\n    return a + b + {}</code>"
cands = [Candidate("t0", f"c{i}", i, code.format(i)) for i in range(4)]
spec = RubricSettings(name="rubric-stub", judge="stub")
ep = Endpoint(name="stub", base_url=sys.argv[1], model="stub", fingerprint="gguf:stub",
              structured_output="json_object",
              limits=Limits(max_concurrency=1))  # one call at a time: a kill after the 3rd
ev = build_evaluator(spec, {"stub": ep}, JsonCache(Path(sys.argv[2]), "judge"))
rows = score_group("run", ev, task, cands, 0)
print(json.dumps([(r["candidate_id"], r["score"], r["status"]) for r in rows]))
"""


def reply(body: dict) -> Reply:
    user = body["messages"][-1]["content"]
    score = int(hashlib.sha256(user.encode()).hexdigest(), 16) % 11 / 10
    return ok(json.dumps({"explanation": "deterministic", "score": score}))


def run_script(url: str, cache: Path) -> list:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, url, str(cache)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": PYTHONPATH},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_scores_resume_after_kill(tmp_path: Path) -> None:
    def slow_after_two(body: dict) -> Reply:
        if len(srv.requests) > 2:
            time.sleep(60)
        return reply(body)

    with OpenAIServer(slow_after_two) as srv:
        child = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, srv.base_url, str(tmp_path / "cache")],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": PYTHONPATH},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while len(srv.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert len(srv.requests) == 3
    with OpenAIServer(reply) as resumed:
        rows = run_script(resumed.base_url, tmp_path / "cache")
        assert len(resumed.requests) == 2  # only the two candidates never answered
    with OpenAIServer(reply) as fresh:
        clean = run_script(fresh.base_url, tmp_path / "clean")
    assert rows == clean
    assert all(status == "scored" for _, _, status in rows)
