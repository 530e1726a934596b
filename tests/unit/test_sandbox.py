"""The execution sandbox, exercised with real hostile programs in real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from judgelab.sandbox import SandboxResult, run_python
from judgelab.sandbox import run as sandbox
from judgelab_cli.main import app

ROOT = Path(__file__).resolve().parents[2]
AS_ROOT = os.geteuid() == 0


def _alive(pid: int) -> bool:
    """Running (not dead, not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _sandbox_dirs() -> set[str]:
    import tempfile

    return {p.name for p in Path(tempfile.gettempdir()).glob("judgelab-sbx-*")}


def test_passing_program_reports_exit_0_and_stdout() -> None:
    r = run_python("print('hello', 6 * 7)", timeout_s=10)
    assert (r.status, r.exit_code, r.timed_out) == ("passed", 0, False)
    assert r.stdout_tail == "hello 42\n"
    assert r.duration_s < 5


def test_failing_program_reports_exit_code_and_traceback() -> None:
    r = run_python("import sys\nprint('x')\nassert 1 == 2, 'boom'", timeout_s=10)
    assert (r.status, r.exit_code) == ("failed", 1)
    assert r.stderr_tail.rstrip().endswith("AssertionError: boom")
    r = run_python("raise SystemExit(7)", timeout_s=10)
    assert (r.status, r.exit_code) == ("failed", 7)


def test_busy_loop_hits_the_wall_clock_deadline() -> None:
    started = time.monotonic()
    r = run_python("while True:\n    pass", timeout_s=1.0, cpu_s=30)
    assert r.status == "timeout" and r.timed_out
    assert r.exit_code == -9
    assert time.monotonic() - started < 5


def test_sleep_cannot_outlive_the_deadline() -> None:
    r = run_python("import time\ntime.sleep(60)", timeout_s=0.5)
    assert r.status == "timeout" and r.timed_out
    assert r.duration_s < 3


def test_cpu_limit_stops_a_busy_loop_before_the_wall_deadline() -> None:
    r = run_python("while True:\n    pass", timeout_s=30, cpu_s=1)
    assert r.status == "timeout"
    assert not r.timed_out  # the CPU limit, not the wall clock, ended it
    assert r.duration_s < 10


def test_cpu_limit_holds_even_when_sigxcpu_is_ignored() -> None:
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass"
    r = run_python(code, timeout_s=30, cpu_s=1)
    assert r.status == "timeout" and not r.timed_out
    assert r.exit_code == -9


def test_memory_balloon_is_a_memory_verdict() -> None:
    r = run_python("x = bytearray(3 * 1024**3)\nprint('allocated')", timeout_s=10, memory_mb=256)
    assert r.status == "memory"
    assert "allocated" not in r.stdout_tail
    # growing a list step by step ends the same way
    r = run_python("x = []\nwhile True:\n    x.append(' ' * 10**6)", timeout_s=20, memory_mb=256)
    assert r.status == "memory"


def test_huge_output_is_bounded_and_never_blocks_the_child() -> None:
    code = (
        "import sys\n"
        "for i in range(2000):\n"
        "    sys.stdout.write('o' * 10_000)\n"
        "    sys.stderr.write('e' * 10_000)\n"
        "print('END')\n"
    )
    r = run_python(code, timeout_s=30, output_limit=1000)
    assert r.status == "passed"  # 20 MB per stream went through without a deadlock
    for tail in (r.stdout_tail, r.stderr_tail):
        assert len(tail) <= 1000 + 40
        assert tail.startswith("[... ")
    assert r.stdout_tail.endswith("END\n")
    assert "bytes dropped" in r.stdout_tail


def _host_processes_with(token: str) -> list[int]:
    """Host pids whose command line contains `token` (pids inside the sandbox's own pid
    namespace mean nothing out here, so the children are found by a unique argument)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _alive(int(entry.name)):
            try:
                if token.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _sleeper(token: str, detach: bool = False) -> str:
    """Code that starts a 120 s child tagged with `token`."""
    extra = ", start_new_session=True" if detach else ""
    return (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)', {token!r}]"
        f"{extra})\n"
        "print(p.pid, flush=True)\n"
    )


def _assert_gone(token: str) -> None:
    deadline = time.monotonic() + 5
    while _host_processes_with(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _host_processes_with(token) == []


def test_child_processes_die_at_the_deadline() -> None:
    token = f"judgelab-test-{os.getpid()}-deadline"
    r = run_python(_sleeper(token) + "import time\ntime.sleep(120)\n", timeout_s=2)
    assert r.status == "timeout"
    assert r.stdout_tail.strip().isdigit()  # the child did start
    _assert_gone(token)


def test_child_processes_die_after_a_normal_exit() -> None:
    token = f"judgelab-test-{os.getpid()}-exit"
    r = run_python(_sleeper(token), timeout_s=10)
    assert r.status == "passed" and r.stdout_tail.strip().isdigit()
    _assert_gone(token)


@pytest.mark.skipif(not AS_ROOT, reason="only root gets a pid namespace (or a private uid)")
def test_a_child_that_leaves_the_process_group_still_dies() -> None:
    token = f"judgelab-test-{os.getpid()}-setsid"
    r = run_python(_sleeper(token, detach=True), timeout_s=10)
    assert r.status == "passed" and r.stdout_tail.strip().isdigit()
    _assert_gone(token)


def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "sk-do-not-leak")
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "src"))
    code = (
        "import json, os, sys\n"
        "print(json.dumps({'env': dict(os.environ), 'cwd': os.getcwd(),\n"
        "                  'isolated': sys.flags.isolated}))\n"
    )
    r = run_python(code, timeout_s=10)
    assert r.status == "passed", r.stderr_tail
    seen = json.loads(r.stdout_tail)
    assert "sk-do-not-leak" not in r.stdout_tail
    assert set(seen["env"]) <= {"PATH", "LANG", "HOME", "TMPDIR", "LC_CTYPE"}
    assert seen["env"]["HOME"] == seen["env"]["TMPDIR"] == seen["cwd"]
    assert seen["isolated"] == 1


def test_temp_dir_is_removed_even_after_a_timeout() -> None:
    before = _sandbox_dirs()
    r = run_python("open('junk', 'w').write('x')", timeout_s=10)
    assert r.status == "passed"
    assert _sandbox_dirs() <= before
    r = run_python(
        "import os, time\nos.makedirs('a/b')\nos.chmod('a', 0)\ntime.sleep(9)", timeout_s=1
    )
    assert r.status == "timeout"
    assert _sandbox_dirs() <= before


@pytest.mark.skipif(not AS_ROOT, reason="only root gets a mount namespace")
def test_tracebacks_are_the_same_every_run() -> None:
    """The workdir appears at one fixed path inside, so explanations are reproducible."""
    code = "import os\nprint(os.getcwd())\nraise ValueError('boom')"
    first, second = (run_python(code, timeout_s=10) for _ in range(2))
    assert first.status == "failed" and first.stdout_tail == "/tmp/sandbox\n"
    assert (first.stdout_tail, first.stderr_tail) == (second.stdout_tail, second.stderr_tail)
    assert 'File "/tmp/sandbox/main.py", line 3' in first.stderr_tail


@pytest.mark.skipif(not AS_ROOT, reason="privileges are dropped only when we are root")
def test_code_runs_unprivileged_and_cannot_write_outside_its_dir(tmp_path: Path) -> None:
    target = tmp_path / "owned.txt"
    secret = tmp_path / "secret.txt"
    secret.write_text("root only")
    secret.chmod(0o600)
    code = (
        "import os\n"
        "print(os.getuid(), os.getgid(), os.getgroups())\n"
        f"for path, mode in (({str(target)!r}, 'w'), ({str(secret)!r}, 'r')):\n"
        "    try:\n"
        "        open(path, mode)\n"
        "        print('allowed')\n"
        "    except OSError:  # EACCES as its uid; ENOENT/EROFS with the mount namespace\n"
        "        print('denied')\n"
    )
    r = run_python(code, timeout_s=10)
    assert r.status == "passed", r.stderr_tail
    ids, write, read = r.stdout_tail.splitlines()
    assert not ids.startswith("0 ")
    assert (write, read) == ("denied", "denied")
    assert not target.exists()


@pytest.mark.skipif(not AS_ROOT, reason="RLIMIT_NPROC binds only for the private uid")
def test_fork_bomb_is_contained() -> None:
    code = (
        "import os\n"
        "n = 0\n"
        "try:\n"
        "    for _ in range(10_000):\n"
        "        if os.fork() == 0:\n"
        "            import time; time.sleep(30); os._exit(0)\n"
        "        n += 1\n"
        "except OSError as err:\n"
        "    print('stopped after', n, err.errno)\n"
    )
    r = run_python(code, timeout_s=10)
    assert r.status == "passed", r.stderr_tail
    assert r.stdout_tail.startswith("stopped after")
    assert int(r.stdout_tail.split()[2]) < sandbox.MAX_PROCESSES


def test_core_dumps_and_file_size_are_limited() -> None:
    code = (
        "import resource\n"
        "print(resource.getrlimit(resource.RLIMIT_CORE))\n"
        "f = open('big', 'wb')\n"
        "try:\n"
        f"    f.write(b'x' * ({sandbox.FILE_SIZE_MB} + 1) * 1024 * 1024)\n"
        "    print('wrote')\n"
        "except OSError as err:\n"
        "    print('refused', err.errno)\n"
    )
    r = run_python(code, timeout_s=20)
    core, outcome = r.stdout_tail.splitlines()
    assert core == "(0, 0)"
    assert outcome == "refused 27"  # EFBIG


def test_other_signals_are_killed() -> None:
    r = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", timeout_s=10)
    assert (r.status, r.exit_code) == ("killed", -11)


def test_invalid_limits_are_a_sandbox_error_not_a_verdict_on_the_code() -> None:
    assert run_python("pass", timeout_s=0).status == "error"
    assert run_python("pass", timeout_s=1, memory_mb=1).status == "error"


def test_result_is_json() -> None:
    r = run_python("print('hi')", timeout_s=10)
    data = json.loads(r.to_json())
    assert data == {
        "status": "passed",
        "exit_code": 0,
        "timed_out": False,
        "duration_s": r.duration_s,
        "stdout_tail": "hi\n",
        "stderr_tail": "",
        "channel": "",
    }
    assert isinstance(r, SandboxResult)


def test_cli_runs_a_file_and_prints_the_verdict(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("print('from file')\nraise SystemExit(3)\n")
    result = CliRunner().invoke(app, ["sandbox", "run", str(script), "--timeout", "10"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["status"], data["exit_code"], data["stdout_tail"]) == ("failed", 3, "from file\n")

    script.write_text("while True:\n    pass\n")
    result = CliRunner().invoke(
        app, ["sandbox", "run", str(script), "--timeout", "20", "--cpu", "1", "--memory-mb", "256"]
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["status"] == "timeout"


def test_cli_missing_file_exits_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["sandbox", "run", str(tmp_path / "nope.py"), "--timeout", "1"]
    )
    assert result.exit_code == 2


def test_cli_as_a_real_process(tmp_path: Path) -> None:
    script = tmp_path / "prog.py"
    script.write_text("print('real process')\n")
    cmd = [sys.executable, "-c", "from judgelab_cli import app; app(prog_name='judgelab')"]
    done = subprocess.run(
        [*cmd, "sandbox", "run", str(script), "--timeout", "10"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stdout_tail"] == "real process\n"
    missing = subprocess.run(
        [*cmd, "sandbox", "run", str(tmp_path / "missing.py"), "--timeout", "10"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert missing.returncode == 2


@pytest.mark.parametrize(
    ("status", "code", "options"),
    [
        ("passed", "print('ok')", []),
        ("failed", "raise SystemExit(4)", []),
        ("timeout", "import time\ntime.sleep(30)", ["--timeout", "0.5"]),
        ("memory", "x = bytearray(2 * 1024**3)", ["--memory-mb", "128"]),
        ("killed", "import os, signal\nos.kill(os.getpid(), signal.SIGABRT)", []),
        ("error", "print('never runs')", []),
    ],
)
def test_cli_reports_every_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: str, code: str, options: list[str]
) -> None:
    if status == "error":  # the sandbox itself cannot start the code
        monkeypatch.setattr(sandbox, "_LAUNCHER", "raise SystemExit(3)")
    script = tmp_path / "prog.py"
    script.write_text(code)
    options = options if "--timeout" in options else ["--timeout", "10", *options]
    result = CliRunner().invoke(app, ["sandbox", "run", str(script), *options])
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert verdict["status"] == status, verdict
    assert "never runs" not in verdict["stdout_tail"]


# --------------------------------------------------------------------------- warm launcher

_PROGRAMS = {
    "passed": ("print('out')", 10),
    "failed": ("import sys\nsys.stderr.write('err\\n')\nraise SystemExit(3)", 10),
    "timeout": ("import time\ntime.sleep(30)", 0.5),
    "killed": ("import os, signal\nos.kill(os.getpid(), signal.SIGABRT)", 10),
}


def test_the_warm_and_the_cold_launcher_give_the_same_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cold path (a launcher interpreter per run) is the fallback: it must stay right."""
    got = {}
    for warm in (True, False):
        monkeypatch.setattr(sandbox, "USE_WARM_LAUNCHER", warm)
        for name, (code, timeout_s) in _PROGRAMS.items():
            r = run_python(code, timeout_s=timeout_s)
            got[warm, name] = (r.status, r.exit_code, r.stdout_tail, r.stderr_tail)
    for name in _PROGRAMS:
        assert got[True, name] == got[False, name], name
        assert got[True, name][0] == name


def test_the_warm_launcher_leaves_with_its_caller() -> None:
    """It exits when the judgelab process that started it is gone, leaving nothing."""
    program = (
        "from judgelab.sandbox import run as sandbox\n"
        "assert sandbox.run_python('pass', timeout_s=10).status == 'passed'\n"
        "print(*[w.proc.pid for w in sandbox._warm.values()])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120, check=True
    )
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 1
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pids[0]}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pids[0]}").exists(), "the warm launcher outlived its caller"
