"""An endpoint audit that fits a serial server (issue 65): README's example (3 tasks, 7
candidates) judged by a rubric judge behind a real loopback server that takes one request at
a time and refuses (429) any sent beside it, as a CPU llama.cpp server can serve only one.

- With the endpoint's defaults (no `max_concurrency`, no `timeout_s`), every call goes alone:
  the server never refuses one and never has two in flight.
- `judgelab audit` exits 4 (`EXIT_UNAVAILABLE`), naming the judge and the share, when more
  than `scores.max_failure_share` of its calls failed, whatever their causes: here 2 of 7
  answered HTTP 500, each cause 1/7, together 2/7 > 0.1; with a share of 0.5 it exits 0.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import shutil  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from judgelab.errors import EXIT_UNAVAILABLE  # noqa: E402
from support.openai_server import OpenAIServer, Reply, http_error  # noqa: E402
from support.pure_endpoint import pure_reply  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FAILING = ("Use max and min.", "text.count(w)")  # two of the seven candidates' texts


def serial_reply(body: dict[str, Any]) -> Reply:
    """pure_reply, a little slow (so that calls sent together would overlap), and HTTP 500
    for the candidates in FAILING (two causes: the server names each)."""
    user = "\n".join(m.get("content") or "" for m in body["messages"] if m["role"] == "user")
    for i, text in enumerate(FAILING):
        if text in user:
            return http_error(500, f"injected fault {i}")
    return {**pure_reply(body), "delay_s": 0.05}


def params(server: OpenAIServer, **scores: Any) -> dict[str, Any]:
    """README's quick start: a rubric judge on an endpoint that sets no limits."""
    return {
        "models": {"my-judge": {"kind": "endpoint", "base_url": server.base_url,
                                "model": "my-judge-model", "family": "mine",
                                "structured_output": "json_object"}},
        "tasks": {"humaneval": {"enabled": False}, "autorl": {"enabled": False},
                  "files": ["inputs/example_tasks.jsonl"]},
        "rollouts": {"candidates": "inputs/example_candidates.jsonl"},
        "scores": {
            "evaluators": [{"name": "rubric-mine", "kind": "rubric", "judge": "my-judge",
                            "call": {"retries": 0}}],
            **scores,
        },
    }  # fmt: skip


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JUDGELAB_ROOT", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    shutil.copytree(ROOT / "inputs", tmp_path / "inputs")
    return tmp_path


def test_the_defaults_send_a_serial_server_one_call_at_a_time(project: Path) -> None:
    from judgelab import api

    with OpenAIServer(serial_reply, max_concurrency=1) as server:
        settings = api.make_settings(params(server), tests=False)
        assert settings.model("my-judge").max_concurrency is None  # the default applies
        tasks = api.load_tasks("inputs/example_tasks.jsonl", settings)
        rollouts = api.load_candidates(tasks, "inputs/example_candidates.jsonl", settings)
        scores = api.score(tasks, rollouts, settings)
    assert (server.rejected, server.max_in_flight) == (0, 1)
    assert len(server.requests) == 7 == scores.height  # one rubric call per candidate
    assert scores["status"].value_counts().sort("status").rows() == [("scored", 5),
                                                                      ("unscored", 2)]  # fmt: skip


@pytest.mark.parametrize(("share", "code"), [(None, EXIT_UNAVAILABLE), (0.5, 0)])
def test_an_audit_with_failed_calls_over_the_share_exits_4(
    project: Path, share: float | None, code: int
) -> None:
    from judgelab_cli import app

    with OpenAIServer(serial_reply, max_concurrency=1) as server:
        extra = {} if share is None else {"max_failure_share": share}
        (project / "params.yaml").write_text(yaml.safe_dump(params(server, **extra)))
        result = CliRunner().invoke(app, [
            "audit", "--params", "params.yaml", "--tasks", "inputs/example_tasks.jsonl",
            "--candidates", "inputs/example_candidates.jsonl", "--out", "audit",
        ])  # fmt: skip
    assert result.exit_code == code, result.output
    assert (project / "audit" / "report.md").exists()  # written either way
    line = (
        "judge failed: rubric-mine: 2 of 7 judge calls failed, 5 of 7 candidates scored "
        "(failed share over scores.max_failure_share = 0.1)"
    )
    assert (line in result.output) == (code == EXIT_UNAVAILABLE)
