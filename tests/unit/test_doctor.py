"""`judgelab doctor`: each check against a real loopback server, real files and the real
sandbox; the CLI's exit code."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from judgelab.config import EndpointModel, load_settings, parse_settings
from judgelab.doctor import check_disk, check_endpoint, check_models, check_sandbox
from judgelab.models.zoo import ZOO

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture()
def models_server() -> Iterator[str]:
    """GET /v1/models: 200 with the right bearer key, 401 otherwise."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            ok = self.path == "/v1/models" and self.headers.get("Authorization") in (
                None,
                "Bearer right",
            )
            body = b'{"data": []}'
            self.send_response(200 if ok else 401)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_endpoint_checks(models_server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    open_spec = EndpointModel(base_url=models_server, model="m")
    assert check_endpoint("a", open_spec).status == "ok"
    keyed = EndpointModel(base_url=models_server, model="m", api_key_env="DOCTOR_TEST_KEY")
    monkeypatch.delenv("DOCTOR_TEST_KEY", raising=False)
    missing = check_endpoint("b", keyed)
    assert missing.status == "fail"
    assert "models.b.api_key_env: environment variable DOCTOR_TEST_KEY is not set" in missing.detail
    monkeypatch.setenv("DOCTOR_TEST_KEY", "wrong")
    refused = check_endpoint("b", keyed)
    assert refused.status == "warn" and "401" in refused.detail
    monkeypatch.setenv("DOCTOR_TEST_KEY", "right")
    assert check_endpoint("b", keyed).status == "ok"
    gone = EndpointModel(base_url=f"http://127.0.0.1:{closed_port()}/v1", model="m")
    down = check_endpoint("c", gone, timeout_s=2)
    assert down.status == "fail" and "unreachable" in down.detail


def test_model_checks_find_missing_and_corrupt_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JUDGELAB_MODELS", str(tmp_path))
    settings = load_settings(ROOT / "params.yaml")
    missing = {c.name: c for c in check_models(settings)}
    assert missing["model:smollm2-135m"].status == "fail"
    assert "not assembled" in missing["model:smollm2-135m"].detail
    (tmp_path / ZOO["smollm2-135m-instruct"].filename).write_bytes(b"GGUF but not the model")
    corrupt = {c.name: c for c in check_models(settings)}["model:smollm2-135m"]
    assert corrupt.status == "fail" and "expected" in corrupt.detail


def test_sandbox_and_disk_checks(tmp_path: Path) -> None:
    assert check_sandbox().status == "ok"
    (plenty,) = check_disk([tmp_path / "not" / "yet"], min_free_gb=0)
    assert plenty.status == "ok" and "GB free" in plenty.detail
    (short,) = check_disk([tmp_path], min_free_gb=1e9)
    assert short.status == "warn"


def test_cli_exit_codes(tmp_path: Path, models_server: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: {}\nscores: {evaluators: []}\nrollouts: {nope: 1}\n")
    proc = subprocess.run(
        [str(BIN / "judgelab"), "doctor", "-p", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "rollouts.nope" in proc.stdout  # bad input
    good = tmp_path / "good.yaml"
    good.write_text(
        yaml.safe_dump(
            {
                "models": {"remote": {"kind": "endpoint", "base_url": models_server, "model": "m"}},
                "tasks": {"autorl": {"enabled": False, "model": "remote"}},
                "rollouts": {"policy": "remote"},
                "scores": {"evaluators": [{"name": "format", "kind": "format"}]},
            }
        )
    )
    proc = subprocess.run(
        [str(BIN / "judgelab"), "doctor", "-p", str(good)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "endpoint:remote" in proc.stdout and "FAIL" not in proc.stdout


@pytest.mark.integration
def test_doctor_passes_on_this_checkout() -> None:
    """The embedded models of params.yaml are assembled, llama.cpp imports, the sandbox runs."""
    from judgelab.models.zoo import ensure_model

    for spec in load_settings(ROOT / "params.yaml").models.values():
        if getattr(spec, "zoo", None):
            ensure_model(spec.zoo)
    proc = subprocess.run(
        [str(BIN / "judgelab"), "doctor"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "llama-cpp-python 0.3.36" in proc.stdout


def test_the_cpu_row_shows_the_instruction_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cpu row prints "<model> [avx avx2 ...]" as written: Rich took the bracketed flag
    list for markup and printed "AMD EPYC ; native bfloat16; 2 cores"."""
    from typer.testing import CliRunner

    from judgelab.hardware import CpuInfo
    from judgelab_cli import app

    cpu = CpuInfo("AMD EPYC 9R14", frozenset({"avx", "avx2", "avx512f", "avx512_bf16", "fma"}))
    monkeypatch.setattr("judgelab.doctor.cpu_info", lambda: cpu)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("JUDGELAB_ROOT", raising=False)
    monkeypatch.setenv("COLUMNS", "400")  # one line per check
    output = CliRunner().invoke(app, ["doctor", "-p", "nope.yaml"]).output
    (row,) = [line for line in output.splitlines() if line.strip("│ ").startswith("cpu ")]
    assert "AMD EPYC 9R14 [avx avx2 avx512_bf16 avx512f fma]; native bfloat16; " in row, row


def test_structured_output_row_reports_the_detected_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For a judge endpoint on `auto`, doctor probes it and says which mode judge calls will
    send, so a user learns it before a run; an explicit setting is reported as set, with no
    probe."""
    from judgelab.doctor import check_endpoints
    from judgelab.evaluators.transport import detect
    from support.openai_server import OpenAIServer, ok, rejects_json_schema

    monkeypatch.setenv("JUDGELAB_CACHE", str(tmp_path))
    detect.forget()
    with OpenAIServer(rejects_json_schema(lambda body: ok("{}"))) as server:
        judge = {"kind": "endpoint", "base_url": server.base_url, "model": "m"}
        data = yaml.safe_load((ROOT / "params.yaml").read_text())
        data["models"]["judge"] = judge
        data["models"]["fixed"] = {**judge, "structured_output": "json_object"}
        data["scores"]["evaluators"] = [
            {"name": "ruler-judge", "kind": "ruler", "judge": "judge"},
            {"name": "ruler-fixed", "kind": "ruler", "judge": "fixed"},
        ]
        data["train"]["rewards"], data["probes"]["judges"] = [], []
        checks = {c.name: c for c in check_endpoints(parse_settings(data))}
        requests = len(server.requests)
    detect.forget()
    row = checks["structured_output:judge"]
    assert row.status == "ok"
    assert row.detail.startswith(
        "json_object (detected by a trial request: json_schema rejected (HTTP 500"
    )
    assert checks["structured_output:fixed"].detail == "json_object (set in params.yaml)"
    assert requests == 2  # json_schema rejected, json_object taken; none for `fixed`
