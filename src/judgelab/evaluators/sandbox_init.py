"""The sandbox's launcher: the first program of every sandbox run (see sandbox.py).

Never imported by judgelab: sandbox.py passes this file's text to `python -I -B -c`, so it
runs with the standard library only, as the caller (root when privileges are dropped),
before and around the untrusted code, which it never executes in its own interpreter.

argv: fd uid isolate workdir hide cpu mem fsize nproc python channel script in_process deadline
   (or `serve <socket fd>`: the warm launcher, see `serve`)
  fd        the report pipe (close-on-exec in the code, which can never write to it)
  uid       the uid/gid to run the code as, or -1 to keep ours
  isolate   "1": try new network, pid, mount and ipc namespaces
  workdir   the code's directory, the one place it may write
  hide      NUL-separated directories to cover with an empty read-only tmpfs
  cpu mem fsize nproc   RLIMIT_CPU (s), RLIMIT_AS (bytes), RLIMIT_FSIZE (bytes), RLIMIT_NPROC
  python    the code's interpreter
  channel   a pipe to leave open in the code process as fd 3 (CHANNEL), or -1
  script    the file the code's interpreter runs: main.py, or the runner that loads it
  in_process "1": run the script in this interpreter (forked from `serve`), not a new one
  deadline  seconds after which SIGALRM ends the launcher, and with it the run, whatever
            happens to the caller

Processes: this launcher unshares the namespaces, then forks a supervisor (pid 1 of the new
pid namespace) that sets up the mounts and forks the code. The code process drops
privileges, sets the limits, installs the seccomp filter (seccomp_filter) and execs
`python -I -B <script>`. The supervisor reaps every
process (it is their init) until the code exits, reports the code's wait status and CPU
time, and exits: as pid 1 its exit makes the kernel SIGKILL everything left in the
namespace, including children that detached with setsid().

Lines written to fd:
  "warn <text>"            a mechanism is unavailable; the run goes on without it
  "limits-set"             the code process is about to exec the code's interpreter
  "exit <status> <cpu_s>"  the code's raw wait status and CPU seconds
  "setup failed: <text>"   the code was not run
"""

import contextlib
import ctypes
import os
import resource
import signal
import sys
import types

CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWNS, CLONE_NEWIPC = 0x40000000, 0x20000000, 0x20000, 0x8000000
NAMESPACES = (
    (CLONE_NEWNET, "network namespace"),
    (CLONE_NEWPID, "pid namespace"),
    (CLONE_NEWNS, "mount namespace"),
    (CLONE_NEWIPC, "ipc namespace"),
)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID = 1, 2
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE = 442, -100, 0x8000  # same number on every arch
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 38, 22, 2
CHANNEL = 3
F_DUPFD_CLOEXEC = 1030
MAX_FD = 1 << 16
INSIDE = "/tmp/sandbox"  # where the workdir appears in the mount namespace: the same path
# every run, so tracebacks and __file__ (which land in verdict explanations) are reproducible

libc = ctypes.CDLL(None, use_errno=True)


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]  # fmt: skip


def say(fd: int, line: str) -> None:
    os.write(fd, (line + "\n").encode())


def check(ok: bool, what: str) -> None:
    if not ok:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(fd: int) -> set[str]:
    done = set()
    for flag, name in NAMESPACES:
        if libc.unshare(flag) == 0:
            done.add(name)
        else:
            say(fd, f"warn {name} unavailable: {os.strerror(ctypes.get_errno())}")
    return done


def isolate_files(fd: int, workdir: bytes, hide: list[bytes], fresh_proc: bool) -> bytes:
    """Everything read-only and nosuid except the workdir, which is moved to INSIDE on an
    otherwise empty /tmp; returns the workdir's path from now on. Only ever called inside
    our own mount namespace, after making it private: nothing here reaches the host."""
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0, "private /")
    handle = os.open(workdir, os.O_PATH | os.O_DIRECTORY)  # reachable once /tmp is covered
    check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,mode=755")
          == 0, "fresh /tmp")  # fmt: skip
    os.mkdir(INSIDE, 0o755)
    source = f"/proc/self/fd/{handle}".encode()
    check(libc.mount(source, INSIDE.encode(), None, MS_BIND | MS_REC, None) == 0, "bind workdir")
    os.close(handle)
    workdir = INSIDE.encode()
    if fresh_proc:  # shows only the namespace's processes (no host command lines)
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        check(libc.mount(b"proc", b"/proc", b"proc", flags, None) == 0, "fresh /proc")
    for path in hide:
        flags = MS_RDONLY | MS_NOSUID | MS_NODEV
        if libc.mount(b"tmpfs", path, b"tmpfs", flags, b"size=4k,mode=755") != 0:
            say(fd, f"warn cannot hide {path.decode()}: {os.strerror(ctypes.get_errno())}")
    attr = MountAttr(MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, 0, 0)
    size = ctypes.sizeof(attr)
    ok = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), size)
    check(ok == 0, "read-only /")
    attr = MountAttr(MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY, 0, 0)
    ok = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, workdir, AT_RECURSIVE, ctypes.byref(attr), size)
    check(ok == 0, "writable workdir")
    return workdir


# ------------------------------------------------------------------ seccomp
# System calls the code has no use for and that widen the kernel it can attack: creating or
# entering namespaces (the way to a root of its own, and from there mount and the rest),
# mounts, tracing other processes, kernel modules and keys, BPF, io_uring, perf. Each fails
# with EPERM; clone3 with ENOSYS, so that glibc falls back to clone, whose namespace flags are
# refused. The list and its reasons: docs/SECURITY.md.
DENIED = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "ptrace",
    "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd",
    "keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "name_to_handle_at", "open_by_handle_at", "swapon", "swapoff", "reboot", "acct", "syslog",
)  # fmt: skip
SYSCALLS = {  # AUDIT_ARCH -> name -> number
    0xC000003E: {  # x86_64
        "unshare": 272,
        "setns": 308,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "name_to_handle_at": 303,
        "open_by_handle_at": 304,
        "swapon": 167,
        "swapoff": 168,
        "reboot": 169,
        "acct": 163,
        "syslog": 103,
        "clone": 56,
    },
    0xC00000B7: {  # aarch64
        "unshare": 97,
        "setns": 268,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "name_to_handle_at": 264,
        "open_by_handle_at": 265,
        "swapon": 224,
        "swapoff": 225,
        "reboot": 142,
        "acct": 89,
        "syslog": 116,
        "clone": 220,
    },
}
COMMON_SYSCALLS = {  # the same number on every architecture
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "clone3": 435, "mount_setattr": 442,
}  # fmt: skip
NAMESPACE_FLAGS = 0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME
EPERM, ENOSYS = 1, 38
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JSET_K, JGE_K, RET_K = 0x20, 0x15, 0x45, 0x35, 0x06
X32_BIT = 0x40000000


class SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                ("k", ctypes.c_uint32)]  # fmt: skip


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def audit_arch() -> int | None:
    machine = os.uname().machine
    return {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}.get(machine)


def seccomp_program(arch: int) -> list[tuple[int, int, int, int]]:
    """Classic BPF over struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6]}."""
    numbers = {**SYSCALLS[arch], **COMMON_SYSCALLS}
    denied = sorted({numbers[name] for name in DENIED})
    prog = [(LD_W_ABS, 0, 0, 4), (JEQ_K, 1, 0, arch), (RET_K, 0, 0, RET_ERRNO | EPERM),
            (LD_W_ABS, 0, 0, 0)]  # fmt: skip
    if arch == 0xC000003E:  # the x32 ABI's numbers are another way in
        prog.append((JGE_K, 0, 1, X32_BIT))
        prog.append((RET_K, 0, 0, RET_ERRNO | EPERM))
    for nr in denied:
        prog += [(JEQ_K, 0, 1, nr), (RET_K, 0, 0, RET_ERRNO | EPERM)]
    prog += [(JEQ_K, 0, 1, numbers["clone3"]), (RET_K, 0, 0, RET_ERRNO | ENOSYS)]
    prog += [(JEQ_K, 0, 3, numbers["clone"]), (LD_W_ABS, 0, 0, 16),  # args[0], low half
             (JSET_K, 0, 1, NAMESPACE_FLAGS), (RET_K, 0, 0, RET_ERRNO | EPERM)]  # fmt: skip
    prog.append((RET_K, 0, 0, RET_ALLOW))
    return prog


def seccomp_filter(fd: int) -> None:
    """Install the filter on this process and all it starts (needs no_new_privs first)."""
    arch = audit_arch()
    if arch is None:
        say(fd, f"warn seccomp filter unavailable: no syscall table for {os.uname().machine}")
        return
    prog = seccomp_program(arch)
    array = (SockFilter * len(prog))(*[SockFilter(*ins) for ins in prog])
    fprog = SockFprog(len(prog), array)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        say(fd, f"warn seccomp filter unavailable: {os.strerror(ctypes.get_errno())}")


def cap(kind: int, soft: int, hard: int) -> None:
    """Lower a limit; never above the current hard limit."""
    cur = resource.getrlimit(kind)[1]
    if cur != resource.RLIM_INFINITY:
        soft, hard = min(soft, cur), min(hard, cur)
    resource.setrlimit(kind, (soft, hard))


def run_code(fd: int, uid: int, limits: list[int], python: str, workdir: bytes,
             channel: int, script: str, in_process: bool) -> None:  # fmt: skip
    cpu, mem, fsize, nproc = limits
    fd = move_above(fd, CHANNEL)  # fd 3 is the channel's place
    if channel >= 0:
        high = move_above(channel, CHANNEL)
        os.dup2(high, CHANNEL)  # inheritable: the code's interpreter keeps it
        os.close(high)
    if uid >= 0:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)  # no privilege gain through setuid binaries
    cap(resource.RLIMIT_CORE, 0, 0)
    cap(resource.RLIMIT_CPU, cpu, cpu + 1)
    cap(resource.RLIMIT_AS, mem, mem)
    cap(resource.RLIMIT_FSIZE, fsize, fsize)
    cap(resource.RLIMIT_NPROC, nproc, nproc)
    os.set_inheritable(fd, False)
    seccomp_filter(fd)
    say(fd, "limits-set")
    env = dict(os.environ, HOME=workdir.decode(), TMPDIR=workdir.decode())
    if in_process:
        run_in_process(script, env)
    os.execve(python, [python, "-I", "-B", script], env)


def run_in_process(script: str, env: dict[str, str]) -> None:
    """Run `script` in this interpreter, a fork of the warm launcher (`serve`), as
    `python -I -B <script>` would: the same interpreter and flags, with nothing of ours left
    open but stdin, stdout, stderr and the channel. Only for a runner that leaves through
    os._exit (the harness); it never returns."""
    os.closerange(CHANNEL + 1, MAX_FD)  # the report pipe among them: its lines stay ours
    try:
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [script]
        path = os.path.abspath(script)
        with open(path, encoding="utf-8") as handle:
            code = compile(handle.read(), path, "exec")
        main = types.ModuleType("__main__")
        main.__file__ = path
        sys.modules["__main__"] = main
        exec(code, vars(main))
    except BaseException:  # noqa: BLE001 - the runner's own failure, shown as CPython would
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


def move_above(fd: int, low: int) -> int:
    """`fd` as a close-on-exec descriptor numbered above `low` (the old one closed)."""
    if fd > low:
        return fd
    import fcntl

    moved = fcntl.fcntl(fd, F_DUPFD_CLOEXEC, low + 1)
    os.close(fd)
    return moved


def supervise(fd: int, uid: int, workdir: bytes, hide: list[bytes], limits: list[int],
              python: str, unshared: set[str], channel: int, script: str,
              in_process: bool) -> None:  # fmt: skip
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # dies (and with it the namespace) with the launcher
    if "mount namespace" in unshared:
        try:
            workdir = isolate_files(fd, workdir, hide, "pid namespace" in unshared)
        except OSError as err:
            say(fd, f"warn file isolation unavailable: {err.strerror}")
        os.chdir(workdir)  # onto the writable bind mount, not the directory beneath it
    code = os.fork()
    if code == 0:
        try:
            run_code(fd, uid, limits, python, workdir, channel, script, in_process)
        except BaseException as err:  # noqa: BLE001 - reported, then the code is not run
            say(fd, f"setup failed: {err!r}")
        os._exit(125)
    while True:  # reap everything (we may be init) until the code itself exits
        pid, status, usage = os.wait4(-1, 0)
        if pid == code:
            say(fd, f"exit {status} {usage.ru_utime + usage.ru_stime!r}")
            return


def launch(argv: list[str]) -> None:
    """One run: argv as the module docstring says (without the program name)."""
    fd, uid, isolate = int(argv[0]), int(argv[1]), argv[2] == "1"
    workdir = argv[3].encode()
    hide = [p.encode() for p in argv[4].split(":") if p]
    limits = [int(a) for a in argv[5:9]]
    python, channel, script = argv[9], int(argv[10]), argv[11]
    in_process, deadline = argv[12] == "1", int(argv[13])
    signal.alarm(deadline)  # a backstop: the launcher, and so the run, ends even if we die
    unshared = unshare(fd) if isolate else set()
    supervisor = os.fork()  # pid 1 of the new pid namespace, when there is one
    if supervisor == 0:
        signal.alarm(0)
        try:
            supervise(fd, uid, workdir, hide, limits, python, unshared, channel, script,
                      in_process)  # fmt: skip
        except BaseException as err:  # noqa: BLE001
            say(fd, f"setup failed: {err!r}")
        os._exit(0)  # as pid 1 this SIGKILLs every process left in the namespace
    os.close(fd)
    if channel >= 0:
        os.close(channel)
    os.waitpid(supervisor, 0)


# ------------------------------------------------------------------ the warm launcher


def serve(control: int) -> None:
    """The warm launcher: started once per judgelab process, it forks a launcher for each
    run instead of starting an interpreter, and answers on the `control` socket (SEQPACKET,
    one JSON message a request, descriptors beside it):
      {"kind": "launch", "argv": [...], "workdir": path}, fds [stdout, stderr, report] or
          [stdin, stdout, stderr, report, channel]  -> {"pid": launcher}  (argv as `launch`
          takes it; its report and channel numbers are replaced by the descriptors received;
          without a stdin, /dev/null)
      {"kind": "kill", "pid": p}     SIGKILL p's process group (p not yet reaped: no reuse)
      {"kind": "reap", "pid": p}     wait for p  -> {"status": s}
      {"kind": "kill-uid", "uid": u} SIGKILL every process of u, from a child running as u
    It exits when the caller's end closes. Single-threaded, so every fork is safe."""
    import ast  # noqa: F401 - the harness's imports, loaded once for every fork
    import gc
    import json
    import socket

    sock = socket.socket(fileno=control)
    gc.freeze()  # the collector of a fork never walks (and so copies) the launcher's objects
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 1 << 16, 8)
        if not message:
            os._exit(0)
        request = json.loads(message)
        kind = request["kind"]
        reply: dict[str, int] = {}
        if kind == "launch":
            reply["pid"] = fork_launcher(sock, request, fds)
        elif kind == "kill":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(request["pid"], signal.SIGKILL)
        elif kind == "reap":
            reply["status"] = os.waitpid(request["pid"], 0)[1]
        elif kind == "kill-uid":
            kill_uid(request["uid"])
        sock.send(json.dumps(reply).encode())


def fork_launcher(sock: object, request: dict, fds: list[int]) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            sock.close()  # type: ignore[attr-defined]  # the run never holds our control socket
            os.setsid()
            os.umask(0o077)
            os.chdir(request["workdir"])
            os.environ.update(HOME=request["workdir"], TMPDIR=request["workdir"])
            if len(fds) == 3:
                fds = [os.open(os.devnull, os.O_RDONLY), *fds, -1]
            for target, fd in zip((0, 1, 2), fds[:3], strict=True):
                os.dup2(fd, target)
            argv = list(request["argv"])
            argv[0], argv[10] = str(fds[3]), str(fds[4])
            for fd in fds[:3]:
                if fd > 2:
                    os.close(fd)
            launch(argv)
        except BaseException:  # noqa: BLE001 - nothing ran; the report pipe's EOF says so
            pass
        os._exit(0)
    for fd in fds:
        os.close(fd)
    return pid


def kill_uid(uid: int) -> None:
    """kill(-1) as `uid` is atomic with respect to fork."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def main() -> None:
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]))
    launch(sys.argv[1:])


if __name__ == "__main__":
    main()
