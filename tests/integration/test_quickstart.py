"""README's "Audit your own judge", run as written: its my-audit/params.yaml (only the judge's
base_url changed) and its commands, beside a copy of the project's inputs/ with the shipped
example tasks and candidates. my-audit/ is a project root of its own: nothing lands in the
checkout's data/.

- against a loopback judge that rejects ``json_schema`` the way llama-cpp-python's server
  does (HTTP 500, its message verbatim): the whole pipeline, which must find ``json_object``
  by itself (the quick start shows no ``structured_output``); then the same command against
  a judge that answers 404 to everything, which must write the report (its first section
  names the judges that failed) and exit non-zero with one line per judge;
- against llama-cpp-python's own server (``python -m llama_cpp.server``) with the zoo's
  SmolLM2-135M as ``my-judge-model``: the quick start's judges, built from its YAML as the
  scores stage builds them, find ``json_object`` and score the smallest example group with
  no failed call (an out-of-range score is the judge's, not a failed call).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import polars as pl
import pytest
import yaml

from judgelab.evaluators.transport.detect import TRIAL_MESSAGES
from support.openai_server import OpenAIServer, http_error, rejects_json_schema
from support.pure_endpoint import pure_reply
from support.scratch import scratch_env

ROOT = Path(__file__).resolve().parents[2]
FAILED_CALL = ("judge call failed", "judge reply error")
pytestmark = pytest.mark.integration


def quickstart() -> tuple[str, list[str]]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Audit your own judge\n", 1)[1].split("\n## ", 1)[0]
    (config,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    (commands,) = re.findall(r"```bash\n(.*?)```", section, re.S)
    return config, [c for c in commands.splitlines() if c.strip() and not c.startswith("#")]


def test_readme_quickstart_gives_a_report(tmp_path: Path) -> None:
    config, commands = quickstart()
    assert "http://127.0.0.1:8000/v1" in config
    # tmp_path plays the checkout: its inputs/; `judgelab` is on PATH (scratch_env puts this
    # venv's bin first, as README's `source .venv/bin/activate` does)
    shutil.copytree(ROOT / "inputs", tmp_path / "inputs")
    project = tmp_path / "my-audit"
    project.mkdir()
    env = scratch_env(project)
    del env["JUDGELAB_ROOT"]  # found as README's reader finds it: the params.yaml in cwd
    # A judge server that rejects json_schema the way llama-cpp-python's does (HTTP 500): the
    # quick start sets no structured_output, so `auto` has to find json_object by itself.
    with OpenAIServer(rejects_json_schema(pure_reply)) as server:
        (project / "params.yaml").write_text(
            config.replace("http://127.0.0.1:8000/v1", server.base_url)
        )
        start = time.monotonic()
        for command in commands:
            proc = subprocess.run(
                command, shell=True, cwd=tmp_path, env=env,
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            assert proc.returncode == 0, f"{command}:\n{proc.stderr[-4000:]}"
        seconds = time.monotonic() - start
    judged = [r for r in server.requests if r["body"].get("model") == "my-judge-model"]
    probes = [r for r in judged if r["body"]["messages"] == TRIAL_MESSAGES]
    calls = [r for r in judged if r not in probes]
    # 3 RULER groups + 7 rubric calls, one repeat, all with json_object and its schema
    assert len(calls) == 3 + 7
    assert {r["body"]["response_format"]["type"] for r in calls} == {"json_object"}
    # the scores stage's probes: json_schema rejected, json_object taken, once
    assert [r["body"]["response_format"]["type"] for r in probes] == ["json_schema", "json_object"]

    assert not (tmp_path / "data").exists()  # the checkout's data/ is left alone
    data = project / "data"
    report = (data / "analysis" / "report.md").read_text()
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    assert {"ruler-mine", "rubric-mine"} <= set(metrics["evaluators"])
    # the decision first; provenance at the end: the scratch project is no git checkout, the
    # judge an endpoint
    assert report.split("\n## ", 2)[1].startswith("Decision\n")
    assert "Which judge to train on" in report
    assert "ruler-mine" in report and "rubric-mine" in report
    assert "zero-advantage" in report.lower()
    tail = report.rsplit("\n## ", 1)[1]
    assert tail.startswith("Provenance\n")
    assert "Computed from code: not a git checkout; `params.yaml` sha256" in tail
    assert f"my-judge `endpoint:{server.base_url.rstrip('/')}|my-judge-model`" in tail
    assert "structured output: my-judge `json_object` (detected)" in tail
    assert "## Judges that failed" not in report
    # the truth: 2 of the 3 tasks have tests; the candidates' verdicts as their code says
    scores = pl.read_parquet(data / "scores" / "scores.parquet")
    truth = scores.filter(scores["evaluator"] == "execution").sort(["task_id", "candidate_id"])
    by_task = {
        t: sorted(truth.filter(truth["task_id"] == t)["score"].to_list(), key=lambda s: s is None)
        for t in truth["task_id"].unique()
    }
    assert sorted(by_task["mine/clamp"]) == [0.0, 0.0, 1.0]
    assert sorted(by_task["mine/word_count"]) == [0.0, 1.0]
    assert by_task["mine/explain"] == [None, None]  # no tests: no truth
    print(f"quick start: {seconds:.0f} s")  # README says how long; not asserted (no timed tests)
    assert yaml.safe_load(config)["rollouts"]["candidates"] == "inputs/example_candidates.jsonl"

    # The same audit, the same command, against a judge that refuses every request: the
    # pipeline writes the scores table and the report, whose first section names each judge,
    # its commonest cause and the fix, and exits non-zero printing the same lines.
    not_found = http_error(404, "The model `my-judge-model` does not exist.")
    with OpenAIServer(lambda body: not_found) as broken:
        (project / "params.yaml").write_text(
            config.replace("http://127.0.0.1:8000/v1", broken.base_url)
        )
        (data / "scores" / "scores.parquet").unlink()
        proc = subprocess.run(
            commands[-1], shell=True, cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    assert proc.returncode == 4, proc.stderr[-4000:]  # a judge could not be used
    failed = pl.read_parquet(data / "scores" / "scores.parquet")  # written before the exit
    assert failed.filter(pl.col("evaluator") == "execution")["status"].to_list().count("scored")
    errors = proc.stderr[proc.stderr.index("error: 2 judge(s) failed") :].splitlines()
    lines = errors[1:3]  # after the head line, one line per judge
    for line, (name, calls) in zip(lines, [("rubric-mine", 7), ("ruler-mine", 3)], strict=True):
        assert line.startswith(f"  {name}: {calls} of {calls} judge calls failed, 0 of 7 ")
        assert "judge endpoint 'my-judge': HTTP 404 request rejected: " in line
        assert "The model `my-judge-model` does not exist." in line  # the server's words
        assert line.endswith("fix: models.my-judge.base_url and models.my-judge.model (the "
                             "endpoint has no such model or path)")  # fmt: skip
    report = (data / "analysis" / "report.md").read_text()
    first = report.split("\n## ", 2)[1]  # the first section, before any figure or ranking
    assert first.startswith("Judges that failed")
    assert [x.strip() for x in lines] == [x[2:] for x in first.splitlines() if x.startswith("- ")]


@pytest.fixture(scope="module")
def llama_cpp_python_server() -> Iterator[str]:
    """`python -m llama_cpp.server` as a user starts it, SmolLM2-135M as `my-judge-model`;
    under judgelab's server lock: one llama.cpp process on the machine at a time."""
    from judgelab.models.server import LOCK_PATH, _free_port
    from judgelab.models.zoo import ensure_model

    gguf = ensure_model("smollm2-135m-instruct")
    port = _free_port("127.0.0.1")
    with open(LOCK_PATH, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
             "--model_alias", "my-judge-model", "--host", "127.0.0.1", "--port", str(port),
             "--n_threads", "2", "--n_ctx", "4096", "--logits_all", "false",
             "--verbose", "False"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        base_url = f"http://127.0.0.1:{port}/v1"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                assert proc.poll() is None, "llama_cpp.server exited"
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                        break
                time.sleep(0.25)
            yield base_url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def test_readme_quickstart_judges_against_llama_cpp_python(
    tmp_path: Path, llama_cpp_python_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judgelab.cache import JsonCache
    from judgelab.config import parse_settings
    from judgelab.evaluators.registry import build_evaluator
    from judgelab.evaluators.transport import detect
    from judgelab.models.server import remote_endpoint
    from judgelab.rollouts.generate import candidates_by_task, rollouts_frame
    from judgelab.rollouts.imported import import_candidates
    from judgelab.tasks.files import load_task_files
    from support.openai_server import LLAMA_CPP_PYTHON_JSON_SCHEMA_ERROR

    base_url = llama_cpp_python_server
    # the loopback test's server says what this one says to json_schema
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
    reply = httpx.post(
        f"{base_url}/chat/completions", timeout=60,
        json={"model": "my-judge-model", "messages": [{"role": "user", "content": "hi"}],
              "response_format": schema},
    )  # fmt: skip
    assert reply.status_code == 500
    assert reply.json()["error"]["message"].startswith(LLAMA_CPP_PYTHON_JSON_SCHEMA_ERROR)

    config, _ = quickstart()
    settings = parse_settings(yaml.safe_load(config.replace("http://127.0.0.1:8000/v1", base_url)))
    spec = settings.models["my-judge"]
    assert spec.structured_output == "auto"  # the quick start shows no such key
    monkeypatch.setenv("JUDGELAB_ROOT", str(tmp_path))
    tasks = load_task_files(settings.tasks.files, ROOT)
    assert settings.rollouts.candidates is not None
    rows = import_candidates(
        ROOT / settings.rollouts.candidates, "rollouts.candidates", tasks, settings.rollouts
    )
    groups = candidates_by_task(rollouts_frame(rows))
    endpoints = {"my-judge": remote_endpoint("my-judge", spec)}
    cache = JsonCache(tmp_path, "judge")
    detect.forget()
    # Each judge on the smallest example group (2 candidates): one RULER call and two rubric
    # calls keep the model's time small.
    task = next(t for t in tasks if t.task_id == "mine/word_count")
    verdicts = []
    start = time.monotonic()
    for ev_spec in settings.scores.evaluators:
        if ev_spec.judge_model is not None:
            judge = build_evaluator(ev_spec, endpoints, cache)
            verdicts += judge.score_group(task, groups[task.task_id])
    print(f"llama-cpp-python judges: {time.monotonic() - start:.0f} s")
    assert detect.detections()["my-judge"]["mode"] == "json_object"
    assert len(verdicts) == 2 + 2
    failed = [v.reason for v in verdicts if v.reason and v.reason.startswith(FAILED_CALL)]
    assert failed == []
    assert any(v.status == "scored" for v in verdicts)
