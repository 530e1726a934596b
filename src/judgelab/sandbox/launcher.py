"""The sandbox's launcher: the first program of every sandbox run (see run.py).

Never imported by judgelab: run.py passes this file's text to `python -I -B -c`, so it runs
with the standard library only, as the caller (root when privileges are dropped), before and
around the untrusted code, which it never executes in its own interpreter.

argv: `launch <report fd> <channel fd (or -1)> <config JSON>` (or `serve <socket fd>`: the warm
launcher, see `serve`). The config:
  uid, tester_uid  the uids/gids to run the code and the trusted tester as, or -1 to keep ours
  isolate   try new network, pid, mount and ipc namespaces
  workdir   the code's directory, the one place it may write
  view      {"binds": [...], "hide": [...], "staged": [[ours, where], ...]}: the only host
            paths the run can see (the interpreter, its standard library, the shared
            libraries it loads), directories among them to cover (site-packages), and folders
            of ours mounted at a host folder's path; null: the host's files as they are
  limits    [RLIMIT_CPU s, RLIMIT_AS bytes, RLIMIT_FSIZE bytes, RLIMIT_NPROC]
  python    the code's interpreter (script mode)
  mode      "script": exec `python -I -B main.py`; "tests": the trusted tester and the
            candidate's runner, each in a process of its own forked from this interpreter
  sources   (tests mode) {"wire", "compare", "tester", "candidate"}: their programs' texts
  backstop  seconds after which SIGALRM ends the launcher, and with it the run, whatever
            happens to the caller

Processes: this launcher unshares the namespaces, then forks a supervisor (pid 1 of the new
pid namespace) that builds the file view (`build_view`) and forks the code's process, which
drops privileges, sets the limits, installs the seccomp filter (seccomp_filter) and runs. In
tests mode the supervisor first forks the tester: it runs under a uid of its own, not
dumpable, reads the tests on its stdin (a pipe from judgelab that no other process holds) and
calls the candidate over two pipes; the candidate's process gets /dev/null as stdin, the call
pipe as fd 3 and the reply pipe as fd 4, and holds nothing else of the run. The supervisor
reaps every process (it is their init) until the code (script mode) or the tester (tests mode)
exits, reports the code's wait status and CPU time, and exits: as pid 1 its exit makes the
kernel SIGKILL everything left in the namespace, including children that detached with setsid().

Lines written to the report fd:
  "warn <text>"            a mechanism is unavailable; the run goes on without it
  "limits-set"             the code process is about to run the code
  "exit <status> <cpu_s>"  the code's raw wait status and CPU seconds
  "tester <status>"        the tester's raw wait status (tests mode)
  "setup failed: <text>"   the code was not run
"""

import contextlib
import ctypes
import json
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
PR_SET_DUMPABLE, MNT_DETACH = 4, 2
CHANNEL = 3  # tests mode: the tester's verdict channel
CALLS, REPLIES = 3, 4  # tests mode, in the candidate's process
TESTER_CALLS, TESTER_REPLIES = 4, 5  # tests mode, in the tester's process
DEVICES = ("null", "zero", "full", "random", "urandom")
F_DUPFD_CLOEXEC = 1030
MAX_FD = 1 << 16
DISK_INODES = 4096  # files the workdir tmpfs holds
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


def build_view(  # noqa: PLR0913 - the view's parts, each named
    fd: int, workdir: bytes, view: dict | None, fresh_proc: bool, uid: int, disk_mb: int
) -> bytes:
    """The code's filesystem, built inside our own (private) mount namespace: nothing here
    reaches the host. With a `view`, a new root holding only its binds (the interpreter, its
    standard library, the shared libraries it loads; each read-only, symlinks on their way
    recreated), minimal /dev, a fresh /proc and the workdir at INSIDE, the one writable place;
    the host's root is then detached. Without one, the host's files read-only, /tmp fresh with
    only the workdir in it. Returns the workdir's path from now on."""
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0, "private /")
    os.umask(0o022)  # the view's folders must be open to the code's uid (read-only anyway)
    plan = [] if view is None else [plan_bind(path) for path in view["binds"]]
    stages = [] if view is None else [(plan_bind(src), dst) for src, dst in view["staged"]]
    handle = os.open(workdir, os.O_PATH | os.O_DIRECTORY)  # reachable once /tmp is covered
    check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=1m,mode=755")
          == 0, "fresh /tmp")  # fmt: skip
    root = "/tmp" if view is not None else ""
    for (_, _, source, _), target in stages:  # a folder of ours, where the host's folder is
        bind(f"/proc/self/fd/{source}", root + target, True)
        os.close(source)
    bound = set()
    for links, real, source, is_dir in plan:
        for link, target in links:
            make_parents(root + link)
            if not os.path.lexists(root + link):
                os.symlink(target, root + link)
        if real not in bound:  # a file and the symlinks naming it: bound once
            bind(f"/proc/self/fd/{source}", root + real, is_dir)
            bound.add(real)
        os.close(source)
    for path in [] if view is None else view["hide"]:
        if os.path.isdir(root + path):
            flags = MS_RDONLY | MS_NOSUID | MS_NODEV
            check(libc.mount(b"tmpfs", (root + path).encode(), b"tmpfs", flags, b"size=4k")
                  == 0, f"hide {path}")  # fmt: skip
    if view is not None:
        for name in DEVICES:
            bind(f"/dev/{name}", f"{root}/dev/{name}", False)
    make_parents(root + INSIDE + "/x")
    workdir_tmpfs(handle, root + INSIDE, uid, disk_mb)
    if fresh_proc:  # shows only the namespace's processes (no host command lines)
        os.makedirs(root + "/proc", exist_ok=True)
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        check(libc.mount(b"proc", (root + "/proc").encode(), b"proc", flags, None) == 0,
              "fresh /proc")  # fmt: skip
    if view is not None:
        os.mkdir("/tmp/.host", 0o700)
        number = SYSCALLS[audit_arch() or 0xC000003E]["pivot_root"]
        check(libc.syscall(number, b"/tmp", b"/tmp/.host") == 0, "pivot_root")
        os.chdir("/")
        check(libc.umount2(b"/.host", MNT_DETACH) == 0, "detach the host's root")
        os.rmdir("/.host")
    set_attr(b"/", MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0, "read-only /")
    set_attr(INSIDE.encode(), MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY, "writable workdir")
    return INSIDE.encode()


def workdir_tmpfs(handle: int, target: str, uid: int, disk_mb: int) -> None:
    """The code's workdir at `target`: a tmpfs of `disk_mb` MiB and DISK_INODES files, owned by
    `uid`, holding a copy of the host workdir's main.py (read through `handle`)."""
    try:
        source = os.open("main.py", os.O_RDONLY, dir_fd=handle)
        with os.fdopen(source, "rb") as program:
            text = program.read()
    except FileNotFoundError:
        text = None
    os.close(handle)
    owner = "" if uid < 0 else f",uid={uid},gid={uid}"
    options = f"size={disk_mb}m,nr_inodes={DISK_INODES},mode=700{owner}".encode()
    check(libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) == 0,
          "workdir tmpfs")  # fmt: skip
    if text is not None:
        path = f"{target}/main.py"
        with open(path, "wb") as program:
            program.write(text)
        if uid >= 0:
            os.chown(path, uid, uid)


def plan_bind(path: str) -> tuple[list[tuple[str, str]], str, int, bool]:
    """How `path` appears in the view: the symlinks met on the way (each (link, its text)),
    the real path it ends at, an O_PATH descriptor of it (opened now, before /tmp is
    covered) and whether it is a directory."""
    links: list[tuple[str, str]] = []
    pending, done = path, ""
    for _ in range(40):  # as the kernel's own limit on symlinks followed
        parts = [p for p in pending.split("/") if p]
        current = done
        for i, part in enumerate(parts):
            current = f"{current}/{part}"
            if os.path.islink(current):
                text = os.readlink(current)
                links.append((current, text))
                parent = current.rsplit("/", 1)[0]
                target = text if text.startswith("/") else f"{parent}/{text}"
                pending = os.path.normpath("/".join([target, *parts[i + 1 :]]))
                done = ""
                break
        else:
            source = os.open(current, os.O_PATH)
            return links, current, source, os.path.isdir(current)
    raise OSError(f"too many symlinks under {path}")


def make_parents(path: str) -> None:
    os.makedirs(path.rsplit("/", 1)[0] or "/", mode=0o755, exist_ok=True)


def bind(source: str, target: str, is_dir: bool) -> None:
    make_parents(target)
    if is_dir:
        os.makedirs(target, mode=0o755, exist_ok=True)
    elif not os.path.lexists(target):
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    ok = libc.mount(source.encode(), target.encode(), None, MS_BIND | MS_REC, None) == 0
    check(ok, f"bind {target}")


def set_attr(path: bytes, add: int, clear: int, what: str) -> None:
    attr = MountAttr(add, clear, 0, 0)
    size = ctypes.sizeof(attr)
    ok = libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, path, AT_RECURSIVE, ctypes.byref(attr), size)
    check(ok == 0, what)


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


def confine(fd: int, uid: int, limits: list[int]) -> None:
    """This process as the sandbox makes it before untrusted (or test) code runs: `uid`, no
    new privileges, the limits, the seccomp filter. The report `fd` stays ours."""
    cpu, mem, fsize, nproc = limits
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
    seccomp_filter(fd)


def arrange(fds: dict[int, int]) -> None:
    """Make each target descriptor (key) a copy of its source (value), inheritable, and close
    every other one: what the process holds is what it was given."""
    import fcntl

    top = max(fds) + 1
    copies = {target: fcntl.fcntl(source, F_DUPFD_CLOEXEC, top) for target, source in fds.items()}
    for target, copy in copies.items():
        os.dup2(copy, target)
    for copy in copies.values():
        os.close(copy)
    low = 0
    for fd in sorted(fds):
        if low < fd:  # closerange(n, n) closes everything from n up on CPython 3.11
            os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, MAX_FD)


def run_code(fd: int, cfg: dict, workdir: bytes) -> None:
    """Script mode: the code's interpreter, exec'd (`python -I -B main.py`); the report pipe
    never crosses the exec."""
    os.set_inheritable(fd, False)
    confine(fd, cfg["uid"], cfg["limits"])
    say(fd, "limits-set")
    env = dict(os.environ, HOME=workdir.decode(), TMPDIR=workdir.decode())
    python = cfg["python"]
    os.execve(python, [python, "-I", "-B", "main.py"], env)


def run_candidate(fd: int, cfg: dict, workdir: bytes, calls: int, replies: int) -> None:
    """Tests mode: the candidate's runner in this interpreter. It holds stdin /dev/null, its
    stdout and stderr, the call pipe (fd CALLS) and the reply pipe (fd REPLIES): no test, no
    expected value, no channel to judgelab."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    arrange({0: devnull, 1: 1, 2: 2, CALLS: calls, REPLIES: replies, fd: fd})
    confine(fd, cfg["uid"], cfg["limits"])
    say(fd, "limits-set")
    os.close(fd)
    env = dict(os.environ, HOME=workdir.decode(), TMPDIR=workdir.decode())
    run_in_process(cfg["sources"], "candidate", env)


def run_tester(fd: int, cfg: dict, channel: int, calls: int, replies: int) -> None:
    """Tests mode: the trusted tester, under a uid of its own and not dumpable (the candidate
    can neither signal it, nor trace it, nor open its memory or descriptors). Its stdin is the
    tests (from judgelab); its verdict goes to the channel; stderr too, for its own crashes."""
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    devnull = os.open(os.devnull, os.O_WRONLY)
    arrange({0: 0, 1: devnull, 2: channel, CHANNEL: channel, TESTER_CALLS: calls,
             TESTER_REPLIES: replies, fd: fd})  # fmt: skip
    confine(fd, cfg["tester_uid"], cfg["limits"])
    os.close(fd)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # a change of uid resets it
    run_in_process(cfg["sources"], "tester", dict(os.environ, HOME="/", TMPDIR="/"))


def run_in_process(sources: dict[str, str], name: str, env: dict[str, str]) -> None:
    """Run the runner `name` of `sources` in this interpreter (a fork of the launcher), with
    `sources["wire"]` and `sources["compare"]` importable as modules of those names; it never
    returns."""
    try:
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [name]
        for module in LIBRARIES:
            made = types.ModuleType(module)
            exec(compiled(sources, module), vars(made))
            sys.modules[module] = made
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compiled(sources, name), vars(main))
    except BaseException:  # noqa: BLE001 - the runner's own failure, shown as CPython would
        import traceback

        traceback.print_exc()
    finally:
        os._exit(1)


LIBRARIES = ("wire", "compare")  # the modules of `sources` the runners import
COMPILED: dict[str, types.CodeType] = {}  # source text -> code, kept by the warm launcher


def compiled(sources: dict[str, str], name: str) -> types.CodeType:
    """The runner `name`, compiled once per launcher (the warm one compiles before it forks,
    so every run finds it done)."""
    text = sources[name]
    if text not in COMPILED:
        COMPILED[text] = compile(text, f"<{name}>", "exec", dont_inherit=True)
    return COMPILED[text]


def move_above(fd: int, low: int) -> int:
    """`fd` as a close-on-exec descriptor numbered above `low` (the old one closed)."""
    if fd > low:
        return fd
    import fcntl

    moved = fcntl.fcntl(fd, F_DUPFD_CLOEXEC, low + 1)
    os.close(fd)
    return moved


def supervise(fd: int, cfg: dict, unshared: set[str], channel: int) -> None:
    libc.prctl(PR_SET_PDEATHSIG, 9, 0, 0, 0)  # dies (and with it the namespace) with the launcher
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    fd = move_above(fd, 9)  # above any descriptor a child is given: it keeps its number there
    workdir = cfg["workdir"].encode()
    if "mount namespace" in unshared:
        try:
            workdir = build_view(fd, workdir, cfg["view"], "pid namespace" in unshared,
                                 cfg["uid"], cfg["disk_mb"])  # fmt: skip
        except OSError as err:
            say(fd, f"setup failed: file view: {err}")
            return
        os.chdir(workdir)  # onto the writable bind mount, not the directory beneath it
    # As pid 1 of a fresh /proc, the supervisor sees every process of the run: their CPU
    # time together is held to the code's (watch_tree).
    budget = cfg["limits"][0] if {"pid namespace", "mount namespace"} <= unshared else None
    if cfg["mode"] == "script":
        code = fork(fd, lambda: run_code(fd, cfg, workdir))
        report_when_done(fd, code, None, budget)
        return
    calls_r, calls_w = os.pipe()
    replies_r, replies_w = os.pipe()
    tester = fork(fd, lambda: run_tester(fd, cfg, channel, calls_w, replies_r))
    code = fork(fd, lambda: run_candidate(fd, cfg, workdir, calls_r, replies_w))
    for end in (calls_r, calls_w, replies_r, replies_w, channel, 0):
        if end >= 0:
            os.close(end)
    report_when_done(fd, code, tester, budget)


def fork(fd: int, child) -> int:  # type: ignore[no-untyped-def]
    """Run `child` in a new process; a failure before it runs anything is reported on `fd`."""
    pid = os.fork()
    if pid == 0:
        try:
            child()
        except BaseException as err:  # noqa: BLE001 - reported, then nothing runs
            with contextlib.suppress(OSError):
                say(fd, f"setup failed: {err!r}")
        os._exit(125)
    return pid


def report_when_done(fd: int, code: int, tester: int | None, budget: int | None) -> None:
    """Reap everything (we may be init) until the code (script mode) or the tester exits;
    report the code's wait status and CPU time (and the tester's status). With a `budget`
    (CPU seconds; we are pid 1 of the run's pid namespace), the code's whole process tree is
    held to it: every process but the tester counts, its children included, and at the
    budget all of them are SIGKILLed; the CPU reported is then the tree's."""
    tree = Tree(skip={os.getpid()} | ({tester} if tester else set()))
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # a child's exit wakes us
    code_done = False
    while True:
        pid, status, usage = os.wait4(-1, os.WNOHANG if budget is not None else 0)
        if pid == 0:
            if budget is not None and tree.cpu() > budget:
                tree.spent = float(budget)
                with contextlib.suppress(OSError):
                    os.kill(-1, signal.SIGKILL)  # from pid 1: every process of the run
            signal.sigtimedwait({signal.SIGCHLD}, WATCH_S)
            continue
        if pid not in (code, tester):
            tree.reaped += usage.ru_utime + usage.ru_stime  # an orphan, reparented to us
        if pid == code and not code_done:
            code_done = True
            cpu = max(usage.ru_utime + usage.ru_stime, tree.cpu() if budget else 0.0, tree.spent)
            say(fd, f"exit {status} {cpu!r}")
            if tester is None:
                return
        elif pid == tester:
            say(fd, f"tester {status}")
            if not code_done:  # the verdict is in: the code has nothing left to do
                with contextlib.suppress(ProcessLookupError):
                    os.kill(code, signal.SIGKILL)
                pid, status, usage = os.wait4(code, 0)
                say(fd, f"exit {status} {usage.ru_utime + usage.ru_stime!r}")
            return


WATCH_S = 0.05  # how often the tree's CPU is read while no child exits


class Tree:
    """The CPU seconds of the run's processes (pid 1 reading its namespace's fresh /proc):
    each live one's own and its waited-for children's, plus what orphans we reaped used."""

    def __init__(self, skip: set[int]) -> None:
        self.skip = skip
        self.reaped = 0.0
        self.spent = 0.0  # the budget, once the tree was killed for going past it
        self.tick = os.sysconf("SC_CLK_TCK")

    def cpu(self) -> float:
        total = self.reaped
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) in self.skip:
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as stat:
                    data = stat.read()
            except OSError:  # gone meanwhile
                continue
            fields = data[data.rindex(b")") + 2 :].split()  # from field 3, the state, on
            total += sum(int(x) for x in fields[11:15]) / self.tick  # utime stime cutime cstime
        return total


def launch(fd: int, channel: int, cfg: dict) -> None:
    """One run (see the module docstring)."""
    signal.alarm(cfg["backstop"])  # the launcher, and so the run, ends even if we die
    unshared = unshare(fd) if cfg["isolate"] else set()
    supervisor = os.fork()  # pid 1 of the new pid namespace, when there is one
    if supervisor == 0:
        signal.alarm(0)
        try:
            supervise(fd, cfg, unshared, channel)
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
      {"kind": "launch", "config": {...}, "workdir": path}, fds [stdout, stderr, report] or
          [stdin, stdout, stderr, report, channel]  -> {"pid": launcher}  (config as `launch`
          takes it; without a stdin, /dev/null)
      {"kind": "kill", "pid": p}     SIGKILL p's process group (p not yet reaped: no reuse)
      {"kind": "reap", "pid": p}     wait for p  -> {"status": s}
      {"kind": "kill-uid", "uid": u} SIGKILL every process of u, from a child running as u
    It exits when the caller's end closes. Single-threaded, so every fork is safe."""
    import gc
    import socket

    preload()

    sock = socket.socket(fileno=control)
    gc.freeze()  # the collector of a fork never walks (and so copies) the launcher's objects
    while True:
        message, fds, _, _ = socket.recv_fds(sock, 1 << 20, 8)
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


def preload() -> None:
    """Loaded once by the warm launcher, so that no run imports them again: the runners' own
    imports, and the standard modules task prompts and tests import most (HumanEval's typing,
    math, hashlib, random...). Each is imported by both processes of a run otherwise."""
    import bisect  # noqa: F401
    import collections  # noqa: F401
    import copy  # noqa: F401
    import decimal  # noqa: F401
    import fractions  # noqa: F401
    import functools  # noqa: F401
    import hashlib  # noqa: F401
    import heapq  # noqa: F401
    import itertools  # noqa: F401
    import linecache  # noqa: F401
    import math  # noqa: F401
    import operator  # noqa: F401
    import random  # noqa: F401
    import re  # noqa: F401
    import statistics  # noqa: F401
    import string  # noqa: F401
    import traceback  # noqa: F401
    import typing  # noqa: F401


def fork_launcher(sock: object, request: dict, fds: list[int]) -> int:
    for name in request["config"].get("sources") or ():
        compiled(request["config"]["sources"], name)
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
            for fd in fds[:3]:
                if fd > 2:
                    os.close(fd)
            launch(fds[3], fds[4], request["config"])
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
    if sys.argv[1] == "launch":
        launch(int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4]))


if __name__ == "__main__":
    main()
