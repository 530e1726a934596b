"""Run untrusted Python in a subprocess sandbox. Generated code never runs in our process.

`run_python(code, timeout_s=...)` writes `code` to `main.py` in a fresh temporary directory
and runs it with `python -I -B main.py` in a child process (script mode). `execute(...,
tests=...)` runs it in tests mode instead: the candidate's runner (candidate.py) imports
main.py and answers calls from the trusted tester (tester.py), a process of its own that
alone holds the tests (verify.py builds on it). Both return a `SandboxResult`; neither raises
for anything the code does. Each run's launcher is a fork of one warm launcher per process
(launcher.serve), not a new interpreter, and the runners run in forks of it too;
USE_WARM_LAUNCHER = False starts one per run.

What is guaranteed (on Linux):
- A fresh temporary directory is the working directory, HOME and TMPDIR; it is removed
  afterwards (also when the code timed out or crashed).
- The environment is scrubbed: the child sees only PATH (a fixed minimal one), LANG, HOME
  and TMPDIR. Nothing from our environment (API keys, tokens) is inherited.
- The interpreter runs isolated (`-I`: no PYTHON* variables, no user site-packages, script
  directory not on sys.path) and writes no bytecode (`-B`). stdin is /dev/null.
- Resource limits, set by the launcher (launcher.py) before the code's interpreter is
  exec'd, so they hold from its first instruction and are inherited by every process it
  starts: RLIMIT_CPU (soft = cpu_s, SIGKILL one second later), RLIMIT_AS (memory_mb),
  RLIMIT_FSIZE (FILE_SIZE_MB per file), RLIMIT_CORE = 0 (no core dumps), RLIMIT_NPROC
  (MAX_PROCESSES), and no_new_privs (exec of a setuid binary gains nothing). If the
  launcher cannot set them, the code is not run (status "error"). With namespaces (root,
  below) the code's whole process tree is also held to cpu_s (the supervisor sums its CPU
  and kills it past the budget: launcher.report_when_done) and all it writes to DISK_MB
  (its workdir is a tmpfs of that size).
- Wall-clock deadline: the launcher runs in its own session and process group; at the
  deadline, and again after a normal exit, the whole process group is SIGKILLed.
- stdout and stderr are drained by threads and only the last `output_limit` bytes of each
  are kept; the rest is discarded without ever blocking the child.
- When we run as root (CI, containers) two more layers hold:
  - Identity: the code runs under a private, otherwise unused uid/gid (one per concurrent
    run, from a pool starting at UID_BASE, reserved across processes with a lock file),
    with no supplementary groups, so RLIMIT_NPROC binds (a fork bomb stops at
    MAX_PROCESSES) and files that are not world-readable stay unreadable. After the run
    every process of that uid is SIGKILLed (`kill -9 -1` executed as that uid). The
    interpreter is one that uid can execute (sys.executable, or the system python3 when
    ours lives under an unreadable /root), so the code sees only the standard library.
  - Namespaces: new network, pid, mount and ipc namespaces. The network namespace has no
    interface up, not even loopback: every connect() fails at once with ENETUNREACH and no
    packet leaves, to the internet or to our own services on 127.0.0.1. The code's
    supervisor is pid 1 of the pid namespace; when the tester (or, in script mode, the code)
    exits or the deadline kills the supervisor, the kernel SIGKILLs every process left in
    it, including children that detached with setsid(). The file view is an allowlist
    (view.py, launcher.build_view): a new root holding only the interpreter, its standard
    library (site-packages covered), each shared library it loads, /dev's null, zero, full,
    random and urandom, a fresh /proc and the code's own directory at the fixed path
    /tmp/sandbox (so tracebacks and explanations are the same every run), the one writable
    place; the host's root is detached (pivot_root). No checkout, virtual environment, home
    or data set is in sight, whatever its permissions; where the view cannot be made,
    nothing runs. In tests mode the tester runs under a uid of its own (UID_BASE + UID_POOL
    + the slot), not dumpable.
  A mechanism the kernel refuses (a container without CAP_SYS_ADMIN, a kernel before 5.12
  for mount_setattr) is skipped and a loud warning naming it is logged once; the rest
  still applies.

What is NOT guaranteed:
- No cgroup: memory is bounded per process by RLIMIT_AS, not in total across the up to
  MAX_PROCESSES processes the code may start; the OOM killer is the final backstop. CPU is
  bounded per process by RLIMIT_CPU, per process tree by the supervisor's watch (namespaces
  only) and in total by the wall-clock deadline.
- A seccomp filter refuses the system calls the code has no use for (new namespaces,
  mounts, ptrace, BPF, kernel modules and keys, io_uring: launcher.DENIED); every other
  call its uid and namespaces allow is open, and a kernel exploit through one of them escapes
  the sandbox. This is process isolation, not a virtual machine.
- Within the view, what the interpreter's own directories hold can be read (the standard
  library, its test suite, the system's shared libraries), though not changed.
- When we are NOT root, only the first four points hold: no private uid, no namespaces,
  no file view (the tests still run in a process of their own).
  The code runs as our own user, can write and connect wherever we can, RLIMIT_NPROC counts
  all of our processes, and a child that calls setsid() survives the run. A loud warning
  is logged once. Run evaluations in a container or as root in a throwaway VM.
- Results are only as deterministic as the code: hash seeds, timing and scheduling vary.
See docs/SECURITY.md for the measured behaviour of each point.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Literal

from judgelab.sandbox.view import View, interpreter_view, staged

log = logging.getLogger(__name__)

SandboxStatus = Literal["passed", "failed", "timeout", "memory", "killed", "error"]

FILE_SIZE_MB = 64  # largest file the code may write
DISK_MB = 128  # all a run may write (a tmpfs workdir of this size; namespaces only): > FILE_SIZE_MB
MAX_PROCESSES = 64  # RLIMIT_NPROC: processes (and threads) of the sandbox uid
UID_BASE = 1_879_100_000  # private uids UID_BASE .. UID_BASE + UID_POOL - 1 (root only)
UID_POOL = 128
USE_NAMESPACES = True  # root only; False exists to measure what the namespaces add
USE_WARM_LAUNCHER = True  # False: a new launcher interpreter per run (bench/sandbox.py)
MIN_MEMORY_MB = 32  # below this the interpreter itself cannot start
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"
_LOCK_DIR_NAME = "judgelab-sandbox-locks"
_LAUNCHER = (Path(__file__).parent / "launcher.py").read_text(encoding="utf-8")
_warned: set[str] = set()


_PIPE_BUF = 60_000  # stdin this small is written before the run starts (a pipe holds 64 KiB)
_HERE = Path(__file__).parent
SOURCES = {  # the programs of tests mode, which the launcher runs (launcher.run_in_process)
    "wire": (_HERE / "wire.py").read_text(encoding="utf-8"),
    "compare": (_HERE / "compare.py").read_text(encoding="utf-8"),
    "candidate": (_HERE / "candidate.py").read_text(encoding="utf-8"),
    "tester": (_HERE / "tester.py").read_text(encoding="utf-8"),
}


@dataclass(frozen=True)
class SandboxResult:
    """What happened to one run.

    status: "passed" (exit 0), "failed" (non-zero exit), "timeout" (wall-clock deadline or
    CPU limit), "memory" (MemoryError or the address-space limit), "killed" (another
    signal), "error" (the sandbox itself could not run the code; the code is not to blame).
    exit_code: the exit status, negative for a signal (-9 = SIGKILL), None for "error".
    timed_out: True only when the wall-clock deadline was hit (a CPU-limit timeout is
    status "timeout" with timed_out False).
    stdout_tail / stderr_tail: the last `output_limit` bytes, decoded as UTF-8 (invalid
    bytes replaced); when more was written, they start with a "[... N bytes dropped ...]"
    line, so each is at most output_limit + 40 characters long.
    channel: what the tester wrote to its channel (tests mode; "" in script mode).
    """

    status: SandboxStatus
    exit_code: int | None
    timed_out: bool
    duration_s: float
    stdout_tail: str
    stderr_tail: str
    channel: str = ""

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)


# --------------------------------------------------------------------------- capture


class _TailReader:
    """Drain a pipe on a daemon thread, keeping only its last `limit` bytes."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self._fd = stream.fileno()
        self._stream = stream
        self._limit = limit
        self._buf = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._run, daemon=True, name="sandbox-reader")
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.total += len(chunk)
            self._buf += chunk
            if len(self._buf) > 2 * self._limit:  # trim in amortised O(1)
                del self._buf[: -self._limit]
        with contextlib.suppress(OSError):
            self._stream.close()

    def wait(self, timeout: float) -> bool:
        """True once the pipe reached EOF (every writer gone) within `timeout` seconds."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def finish(self, wait_s: float) -> str:
        """Wait for EOF (all writers dead) and return the bounded tail."""
        self._thread.join(wait_s)
        if self._thread.is_alive():
            log.warning("sandbox: a process outside our reach still holds the output pipe")
        tail = bytes(self._buf[-self._limit :]) if self._limit else b""
        text = tail.decode("utf-8", errors="replace")
        dropped = self.total - len(tail)
        return f"[... {dropped} bytes dropped ...]\n{text}" if dropped > 0 else text


# --------------------------------------------------------------------------- identity


@dataclass(frozen=True)
class _Launch:
    """How children are started on this machine: which interpreter, as which user, seeing
    which files (None: no view could be made, or no namespaces to make it in)."""

    python: str
    drop_privileges: bool
    view: View | None = None


_launch: _Launch | None = None
_launch_lock = threading.Lock()
_slots_lock = threading.Lock()
_slots_in_use: set[int] = set()


def _interpreter_candidates() -> list[str]:
    found = [sys.executable, os.path.realpath(sys.executable)]
    found.append(getattr(sys, "_base_executable", sys.executable))
    for name in (f"python{sys.version_info[0]}.{sys.version_info[1]}", "python3"):
        if path := shutil.which(name, path=SAFE_PATH):
            found.append(path)
    return list(dict.fromkeys(p for p in found if p))


def _survey_interpreter(python: str, uid: int) -> str | None:
    """The interpreter's "major.minor" when `uid` can run it from a sandbox dir, else None."""
    workdir = _make_workdir(uid)
    try:
        out = subprocess.run(
            [python, "-I", "-B", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            cwd=workdir, env=_child_env(workdir), stdin=subprocess.DEVNULL,
            capture_output=True, timeout=30, user=uid, group=uid, extra_groups=[],
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as err:
        log.debug("sandbox: %s cannot run as uid %d: %s", python, uid, err)
        return None
    finally:
        _remove_tree(workdir)
    return out.stdout.decode().strip() if out.returncode == 0 else None


def _choose_launch() -> _Launch:
    if os.geteuid() != 0:
        log.warning(
            "SANDBOX RUNS GENERATED CODE AS YOUR OWN USER (uid %d): judgelab is not root, so "
            "it cannot drop privileges or create namespaces. The code can write and connect "
            "wherever you can and RLIMIT_NPROC counts all your processes. Run evaluations in a "
            "container or as a throwaway user.",
            os.geteuid(),
        )
        return _Launch(python=sys.executable, drop_privileges=False)
    # Surveyed under a reserved uid: another run's clean-up kills every process of its own
    # uid, and so must never meet a survey there.
    with _reserved_uid() as (uid, _):
        return _choose_as(uid)


def _choose_as(uid: int) -> _Launch:
    ours = f"{sys.version_info[0]}.{sys.version_info[1]}"
    fallback: str | None = None
    chosen: str | None = None
    for python in _interpreter_candidates():
        version = _survey_interpreter(python, uid)
        if version == ours:
            chosen = python
            break
        if version and fallback is None:
            fallback = python
    if chosen is None and fallback is not None:
        log.warning("sandbox: no Python %s the sandbox uid can run; using %s", ours, fallback)
        chosen = fallback
    if chosen is not None:
        python = os.path.realpath(chosen)  # the view binds the real file, not a link to it
        env = _child_env(Path("/"))
        view = interpreter_view(python, env, user=uid, group=uid, extra_groups=[])
        if view is not None:
            view = staged(view, _lock_dir())
        return _Launch(python=python, drop_privileges=True, view=view)
    log.warning(
        "SANDBOX RUNS GENERATED CODE AS ROOT: no interpreter could be started under an "
        "unprivileged uid (tried %s). The code can write anywhere and RLIMIT_NPROC does not "
        "bind. Install a system python3 readable by all users.",
        _interpreter_candidates(),
    )
    return _Launch(python=sys.executable, drop_privileges=False)


def _get_launch() -> _Launch:
    global _launch
    with _launch_lock:
        if _launch is None:
            _launch = _choose_launch()
            log.info("sandbox: python %s, drop privileges: %s, view: %s", _launch.python,
                     _launch.drop_privileges, _launch.view)  # fmt: skip
        return _launch


def _lock_dir() -> Path:
    path = Path(tempfile.gettempdir()) / _LOCK_DIR_NAME
    path.mkdir(mode=0o700, exist_ok=True)
    if path.stat().st_uid != os.geteuid():
        raise OSError(f"{path} is not owned by us; refusing to use it for sandbox locks")
    return path


@contextlib.contextmanager
def _reserved_uid():  # type: ignore[no-untyped-def]
    """A sandbox uid no other run (thread or process) holds until we leave, and the handle of
    its lock file, which says how its last holder left (`_private_uid`)."""
    lock_dir = _lock_dir()
    for slot in range(UID_POOL):
        with _slots_lock:
            if slot in _slots_in_use:
                continue
            _slots_in_use.add(slot)
        handle = open(lock_dir / f"uid-{slot}.lock", "a+b")  # noqa: SIM115 - held for the run
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            with _slots_lock:
                _slots_in_use.discard(slot)
            continue
        try:
            yield UID_BASE + slot, handle
        finally:
            handle.close()
            with _slots_lock:
                _slots_in_use.discard(slot)
        return
    raise OSError(f"all {UID_POOL} sandbox uids are in use")


_CLEAN = b"clean"  # a lock file's word for "its last run left no process behind"


@contextlib.contextmanager
def _private_uid():  # type: ignore[no-untyped-def]
    """Reserve a sandbox uid for the duration of one run. A run that did not end through
    here (its judgelab process died mid-run) may have left processes of the uid and of its
    tester's: those are killed first. A run that ended here left none (its pid namespace, or
    the kill after it, saw to that), and the next one skips the kill."""
    with _reserved_uid() as (uid, handle):
        handle.seek(0)
        if handle.read() != _CLEAN:
            _kill_all_of(uid)
            _kill_all_of(uid + UID_POOL)
        handle.truncate(0)
        handle.flush()
        yield uid
        handle.write(_CLEAN)
        handle.flush()


def _kill_all_of(uid: int) -> None:
    """SIGKILL every process of `uid`: kill(-1) as that uid is atomic with respect to fork."""
    warm = _warm_launcher(_get_launch().python)
    if warm is not None:
        with contextlib.suppress(OSError):
            warm.ask({"kind": "kill-uid", "uid": uid})
            return
    kill = shutil.which("kill", path=SAFE_PATH)
    if kill is None:
        log.warning("sandbox: no kill(1) found; escaped processes of uid %d may survive", uid)
        return
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [kill, "-9", "-1"], env={"PATH": SAFE_PATH}, cwd="/", stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10,
            user=uid, group=uid, extra_groups=[],
        )  # fmt: skip


# --------------------------------------------------------------------------- workdir


def _child_env(workdir: Path) -> dict[str, str]:
    return {"PATH": SAFE_PATH, "LANG": "C.UTF-8", "HOME": str(workdir), "TMPDIR": str(workdir)}


def _make_workdir(uid: int | None) -> Path:
    workdir = Path(tempfile.mkdtemp(prefix="judgelab-sbx-"))
    if uid is not None:
        os.chown(workdir, uid, uid)
    return workdir


def _remove_tree(path: Path) -> None:
    def make_writable_and_retry(func, target, _exc):  # type: ignore[no-untyped-def]
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
            func(target)

    shutil.rmtree(path, onerror=make_writable_and_retry)
    if path.exists():
        log.warning("sandbox: could not remove %s", path)


# --------------------------------------------------------------------------- running


def _error(message: str, started: float) -> SandboxResult:
    log.error("sandbox error: %s", message)
    return SandboxResult("error", None, False, time.monotonic() - started, "", message)


def _classify(
    exit_code: int, timed_out: bool, cpu_used: float, cpu_limit: int, stderr: str
) -> SandboxStatus:
    if timed_out:
        return "timeout"
    if exit_code == 0:
        return "passed"
    if exit_code == -signal.SIGXCPU or (exit_code == -signal.SIGKILL and cpu_used >= cpu_limit):
        return "timeout"
    last = next((ln.strip() for ln in reversed(stderr.splitlines()) if ln.strip()), "")
    if last.startswith("MemoryError") or "Cannot allocate memory" in last:
        return "memory"
    if exit_code < 0:
        return "killed"
    return "failed"


def run_python(
    code: str,
    *,
    timeout_s: float,
    cpu_s: float | None = None,
    memory_mb: int = 1024,
    output_limit: int = 64_000,
) -> SandboxResult:
    """Run `code` as a Python program in the sandbox and report what happened.

    timeout_s: wall-clock limit. cpu_s: CPU-time limit (whole seconds, rounded up;
    defaults to timeout_s). memory_mb: address-space limit per process. output_limit:
    bytes of stdout and of stderr to keep (the tail).
    """
    return execute(code, timeout_s=timeout_s, cpu_s=cpu_s, memory_mb=memory_mb,
                   output_limit=output_limit)  # fmt: skip


def execute(
    code: str,
    *,
    timeout_s: float,
    cpu_s: float | None = None,
    memory_mb: int = 1024,
    output_limit: int = 64_000,
    tests: bytes | None = None,
    channel_limit: int = 1 << 24,
) -> SandboxResult:
    """`run_python`, or, given `tests` (the tester's stdin, tester.py says what), a test run:
    main.py is imported by the candidate's runner and called by the trusted tester, whose
    verdict comes back as SandboxResult.channel (its last `channel_limit` bytes). The limits
    hold for each of the two processes."""
    started = time.monotonic()
    if timeout_s <= 0 or (cpu_s is not None and cpu_s <= 0):
        return _error(f"timeout_s and cpu_s must be > 0 (got {timeout_s}, {cpu_s})", started)
    if memory_mb < MIN_MEMORY_MB:
        return _error(f"memory_mb must be >= {MIN_MEMORY_MB} (got {memory_mb})", started)
    cpu_limit = max(1, math.ceil(cpu_s if cpu_s is not None else timeout_s))
    launch = _get_launch()
    try:
        identity = _private_uid() if launch.drop_privileges else contextlib.nullcontext(None)
        with identity as uid:
            workdir = _make_workdir(uid)
            try:
                (workdir / "main.py").write_text(code, encoding="utf-8", errors="surrogatepass")
                limits = (cpu_limit, memory_mb << 20, FILE_SIZE_MB << 20, MAX_PROCESSES)
                run = _Run(uid, launch, workdir, timeout_s, limits, tests, channel_limit)
                return _run_in(run, max(0, output_limit))
            finally:
                _remove_tree(workdir)
    except OSError as err:
        return _error(f"sandbox could not run the code: {err}", started)


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        log.warning("SANDBOX WEAKER THAN DOCUMENTED: %s (see docs/SECURITY.md)", message)


@dataclass(frozen=True)
class _Run:
    """One run: who runs it, where, under which limits, in which mode."""

    uid: int | None
    launch: _Launch
    workdir: Path
    timeout_s: float
    limits: tuple[int, int, int, int]
    tests: bytes | None
    channel_limit: int

    @property
    def isolate(self) -> bool:
        return os.geteuid() == 0 and USE_NAMESPACES

    def config(self) -> dict[str, object]:
        """What launcher.launch is told (its module docstring)."""
        uid = -1 if self.uid is None else self.uid
        view = self.launch.view.to_json() if self.launch.view and self.isolate else None
        if self.isolate and view is None:  # fail closed: never the host's files instead
            raise OSError(f"no file view could be made for {self.launch.python} (its survey "
                          "failed; see the log): nothing is run without one")  # fmt: skip
        return {
            "uid": uid, "tester_uid": -1 if self.uid is None else self.uid + UID_POOL,
            "isolate": self.isolate, "workdir": str(self.workdir), "view": view,
            "limits": list(self.limits), "python": self.launch.python,
            "mode": "script" if self.tests is None else "tests",
            "sources": SOURCES if self.tests is not None else None,
            "backstop": math.ceil(self.timeout_s) + 30, "disk_mb": DISK_MB,
        }  # fmt: skip


def _run_in(run: _Run, output_limit: int) -> SandboxResult:
    config = run.config()  # before any pipe or process: it may refuse the run
    warm = _warm_launcher(run.launch.python)
    pipes = _Pipes.open(tests=run.tests is not None)
    if run.tests is not None and len(run.tests) <= _PIPE_BUF:
        os.write(pipes.stdin_w, run.tests)  # fits the pipe: there before the tester starts
        os.close(pipes.stdin_w)
        pipes.stdin_w = -1
    started = time.monotonic()
    launcher = _start(warm, run, config, pipes)
    out, err, report, channel = _readers(pipes, run, output_limit)
    deadline = started + run.timeout_s
    timed_out = not launcher.wait(report, max(0.0, deadline - time.monotonic()))
    # Killing the launcher's group kills the supervisor, pid 1 of the namespace, and so
    # every process in it; without a pid namespace only the group (and, below, the uid).
    launcher.kill_and_reap()
    duration = time.monotonic() - started
    lines = report.finish(2.0).splitlines()
    pid_namespace = run.isolate and "warn pid namespace unavailable" not in " ".join(lines)
    if run.uid is not None and not pid_namespace:
        _kill_all_of(run.uid)  # children that left the process group; frees the pipes
        _kill_all_of(run.uid + UID_POOL)
    stdout_tail, stderr_tail = out.finish(2.0), err.finish(2.0)
    said = channel.finish(2.0) if channel is not None else ""
    cpu_limit = run.limits[0]
    return _result(lines, timed_out, duration, cpu_limit, stdout_tail, stderr_tail, said)


def _start(
    warm: _WarmLauncher | None, run: _Run, config: dict[str, object], pipes: _Pipes
) -> _WarmRun | _ColdRun:
    """The run's launcher: a fork of the warm launcher, else, when there is none or it fails,
    a new interpreter. Our copies of the launcher's ends of the pipes are closed either way;
    ours too if nothing started."""
    try:
        launcher: _WarmRun | _ColdRun | None = None
        if warm is not None:
            try:
                launcher = _WarmRun(warm, run, config, pipes)
            except OSError as err:
                _warn_once(f"the warm launcher failed ({err}); starting one per run")
                _warm_broken.add((run.launch.python, _LAUNCHER))
        if launcher is None:
            launcher = _ColdRun(run, config, pipes)
    except OSError:
        pipes.close_ours()
        raise
    finally:
        pipes.close_theirs()
    return launcher


def _readers(
    pipes: _Pipes, run: _Run, output_limit: int
) -> tuple[_TailReader, _TailReader, _TailReader, _TailReader | None]:
    """Readers of the code's stdout and stderr, the launcher's report and (tests mode) the
    tester's channel; tests too large for the pipe are fed now, on a thread."""
    out = _TailReader(os.fdopen(pipes.stdout_r, "rb"), output_limit)
    err = _TailReader(os.fdopen(pipes.stderr_r, "rb"), output_limit)
    report = _TailReader(os.fdopen(pipes.report_r, "rb"), 16_384)
    channel = None
    if run.tests is not None:
        channel = _TailReader(os.fdopen(pipes.channel_r, "rb"), run.channel_limit)
        if pipes.stdin_w >= 0:
            _feed(os.fdopen(pipes.stdin_w, "wb"), run.tests)
    return out, err, report, channel


def _result(
    lines: list[str],
    timed_out: bool,
    duration: float,
    cpu_limit: int,
    stdout_tail: str,
    stderr_tail: str,
    said: str,
) -> SandboxResult:
    """The run's result from the launcher's report: no "limits-set" means the code never ran
    (a sandbox error); else the code's exit status and CPU time, classified."""
    for line in lines:
        if line.startswith("warn "):
            _warn_once(line[5:])
    # A tester's verdict can come before the code started (tests that do not run): without
    # "limits-set" the run is still the tester's; a setup that failed never is.
    failed = any(ln.startswith("setup failed") for ln in lines)
    if failed or ("limits-set" not in lines and not said):
        detail = next((ln for ln in lines if ln.startswith("setup failed")), "")
        detail = detail or stderr_tail[-500:] or "no report from the launcher"
        return SandboxResult("error", None, False, duration, "", f"sandbox setup failed: {detail}")
    ended = [ln.split() for ln in lines if ln.startswith("exit ")]
    if ended:
        exit_code = os.waitstatus_to_exitcode(int(ended[-1][1]))
        cpu_used = float(ended[-1][2])
    else:  # the deadline's SIGKILL reached the code before it exited
        exit_code, cpu_used = -signal.SIGKILL, 0.0
    status_ = _classify(exit_code, timed_out, cpu_used, cpu_limit, stderr_tail)
    return SandboxResult(status_, exit_code, timed_out, duration, stdout_tail, stderr_tail, said)


# --------------------------------------------------------------------------- launching


@dataclass
class _Pipes:
    """The run's pipes: ours to read (and the tester's stdin to write), theirs to pass on."""

    stdout_r: int
    stdout_w: int
    stderr_r: int
    stderr_w: int
    report_r: int
    report_w: int
    channel_r: int = -1
    channel_w: int = -1
    stdin_r: int = -1
    stdin_w: int = -1

    @classmethod
    def open(cls, tests: bool) -> _Pipes:
        pipes = cls(*os.pipe(), *os.pipe(), *os.pipe())
        if tests:
            pipes.channel_r, pipes.channel_w = os.pipe()
            pipes.stdin_r, pipes.stdin_w = os.pipe()
        return pipes

    def theirs(self) -> list[int]:
        """stdin, stdout, stderr, report and (tests mode) the channel, in that order."""
        fds = [self.stdin_r, self.stdout_w, self.stderr_w, self.report_w, self.channel_w]
        return [fd for fd in fds if fd >= 0] if self.stdin_r >= 0 else fds[1:4]

    def close_theirs(self) -> None:
        for fd in (self.stdin_r, self.stdout_w, self.stderr_w, self.report_w, self.channel_w):
            if fd >= 0:
                os.close(fd)

    def close_ours(self) -> None:
        for fd in (self.stdout_r, self.stderr_r, self.report_r, self.channel_r, self.stdin_w):
            if fd >= 0:
                os.close(fd)


class _ColdRun:
    """The launcher as a new interpreter (`python -c launcher.py`), our own child."""

    def __init__(self, run: _Run, config: dict[str, object], pipes: _Pipes) -> None:
        passed = tuple(fd for fd in (pipes.report_w, pipes.channel_w) if fd >= 0)
        python, workdir = run.launch.python, run.workdir
        # The launcher runs as us (root) to unshare and mount; it drops to `uid` itself.
        argv = [str(pipes.report_w), str(pipes.channel_w), json.dumps(config)]
        self.proc = subprocess.Popen(
            [python, "-I", "-B", "-c", _LAUNCHER, "launch", *argv],
            cwd=workdir, env=_child_env(workdir),
            stdin=pipes.stdin_r if pipes.stdin_r >= 0 else subprocess.DEVNULL,
            stdout=pipes.stdout_w, stderr=pipes.stderr_w, pass_fds=passed,
            start_new_session=True, umask=0o077,
        )  # fmt: skip
        # Wait without reaping, so the pid (and process group id) stays ours until killpg.
        self.exited = threading.Event()
        threading.Thread(target=self._wait, daemon=True, name="sandbox-waiter").start()

    def _wait(self) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOWAIT)
        self.exited.set()

    def wait(self, report: _TailReader, timeout: float) -> bool:
        return self.exited.wait(timeout)

    def kill_and_reap(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.exited.wait()
        try:
            os.waitpid(self.proc.pid, 0)
        except ChildProcessError:  # someone else in this process reaped it
            raise OSError(f"lost track of sandbox process {self.proc.pid}") from None


class _WarmRun:
    """The launcher forked by the warm launcher, which reaps it when we say so: until then
    its pid, and so its process group, cannot be reused."""

    def __init__(self, warm: _WarmLauncher, run: _Run, config: dict[str, object], pipes: _Pipes):
        self.warm = warm
        request = {"kind": "launch", "config": config, "workdir": str(run.workdir)}
        self.pid = warm.ask(request, pipes.theirs())["pid"]

    def wait(self, report: _TailReader, timeout: float) -> bool:
        """The run is over when the report pipe closes: the supervisor (the code's parent)
        holds it to the end, the code never does."""
        return report.wait(timeout)

    def kill_and_reap(self) -> None:
        self.warm.ask({"kind": "kill", "pid": self.pid})
        self.warm.ask({"kind": "reap", "pid": self.pid})


class _WarmLauncher:
    """One warm launcher (launcher.serve) per judgelab process and interpreter: a run
    costs a fork of it instead of two interpreter starts. Requests are one at a time."""

    def __init__(self, python: str) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.proc = subprocess.Popen(
                [python, "-I", "-B", "-c", _LAUNCHER, "serve", str(theirs.fileno())],
                cwd="/", env=_child_env(Path("/")), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                start_new_session=True, umask=0o077,
            )  # fmt: skip
        self.sock = ours
        self.lock = threading.Lock()

    def ask(self, request: dict[str, object], fds: list[int] | None = None) -> dict[str, int]:
        with self.lock:
            try:
                socket.send_fds(self.sock, [json.dumps(request).encode()], fds or [])
                reply = self.sock.recv(4096)
            except OSError as err:
                raise OSError(f"the sandbox's warm launcher failed: {err}") from None
        if not reply:
            raise OSError(f"the sandbox's warm launcher exited ({self.proc.poll()})")
        return json.loads(reply)

    def close(self) -> None:
        self.sock.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


_warm: dict[tuple[str, str], _WarmLauncher] = {}
_warm_broken: set[tuple[str, str]] = set()
_warm_lock = threading.Lock()


def _warm_launcher(python: str) -> _WarmLauncher | None:
    """The warm launcher for `python`, started on first use; None when USE_WARM_LAUNCHER is
    off. One that died is replaced (its runs in flight fail as sandbox errors)."""
    key = (python, _LAUNCHER)  # a launcher changed at run time (tests) gets its own
    if not USE_WARM_LAUNCHER or key in _warm_broken:
        return None
    with _warm_lock:
        warm = _warm.get(key)
        if warm is None or warm.proc.poll() is not None:
            warm = _warm[key] = _WarmLauncher(python)
        return warm


def _feed(stream: IO[bytes], data: bytes) -> None:
    """Write `data` to the code's stdin and close it, on a thread: a program that never reads
    must not block us once the pipe is full."""

    def write() -> None:
        with contextlib.suppress(OSError, ValueError):
            stream.write(data)
        with contextlib.suppress(OSError, ValueError):
            stream.close()

    threading.Thread(target=write, daemon=True, name="sandbox-stdin").start()
