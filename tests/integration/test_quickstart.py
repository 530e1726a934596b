"""README's "Audit your own judge", run as written: its my-audit/params.yaml (only the judge's
base_url changed, to a loopback OpenAI-compatible judge) and its commands, beside a copy of the
project's inputs/ with the shipped example tasks and candidates. my-audit/ is a project root
of its own: nothing lands in the checkout's data/."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.support.openai_server import OpenAIServer
from tests.support.pure_endpoint import pure_reply
from tests.support.scratch import BIN, scratch_env

ROOT = Path(__file__).resolve().parents[2]
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
    # tmp_path plays the checkout: its inputs/ and .venv (README's ../.venv/bin/judgelab)
    shutil.copytree(ROOT / "inputs", tmp_path / "inputs")
    (tmp_path / ".venv").symlink_to(BIN.parent)
    project = tmp_path / "my-audit"
    project.mkdir()
    env = scratch_env(project)
    del env["JUDGELAB_ROOT"]  # found as README's reader finds it: the params.yaml in cwd
    with OpenAIServer(pure_reply) as server:
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
    # 3 RULER groups + 7 rubric calls, one repeat
    assert len(judged) == 3 + 7

    assert not (tmp_path / "data").exists()  # the checkout's data/ is left alone
    data = project / "data"
    report = (data / "analysis" / "report.md").read_text()
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    assert {"ruler-mine", "rubric-mine"} <= set(metrics["evaluators"])
    assert "Which judge to train on" in report
    assert "ruler-mine" in report and "rubric-mine" in report
    assert "zero-advantage" in report.lower()
    # provenance on top: the scratch project is no git checkout; the judge is an endpoint
    head = report.split("\n## ", 1)[0]
    assert "Computed from code: not a git checkout; `params.yaml` sha256" in head
    assert f"my-judge `endpoint:{server.base_url.rstrip('/')}|my-judge-model`" in head
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
