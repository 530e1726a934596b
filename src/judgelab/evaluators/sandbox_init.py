"""The sandbox's launcher: the first program of every sandbox run (see sandbox.py).

Never imported by judgelab: sandbox.py passes this file's text to `python -I -B -c`, so it
runs with the standard library only, as the caller (root when privileges are dropped),
before and around the untrusted code, which it never executes in its own interpreter.

argv: fd uid isolate workdir hide cpu mem fsize nproc python
  fd        the report pipe (close-on-exec in the code, which can never write to it)
  uid       the uid/gid to run the code as, or -1 to keep ours
  isolate   "1": try new network, pid, mount and ipc namespaces
  workdir   the code's directory, the one place it may write
  hide      NUL-separated directories to cover with an empty read-only tmpfs
  cpu mem fsize nproc   RLIMIT_CPU (s), RLIMIT_AS (bytes), RLIMIT_FSIZE (bytes), RLIMIT_NPROC
  python    the code's interpreter

Processes: this launcher unshares the namespaces, then forks a supervisor (pid 1 of the new
pid namespace) that sets up the mounts and forks the code. The code process drops
privileges, sets the limits and execs `python -I -B main.py`. The supervisor reaps every
process (it is their init) until the code exits, reports the code's wait status and CPU
time, and exits: as pid 1 its exit makes the kernel SIGKILL everything left in the
namespace, including children that detached with setsid().

Lines written to fd:
  "warn <text>"            a mechanism is unavailable; the run goes on without it
  "limits-set"             the code process is about to exec the code's interpreter
  "exit <status> <cpu_s>"  the code's raw wait status and CPU seconds
  "setup failed: <text>"   the code was not run
"""

import ctypes
import os
import resource
import sys

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
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
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


def cap(kind: int, soft: int, hard: int) -> None:
    """Lower a limit; never above the current hard limit."""
    cur = resource.getrlimit(kind)[1]
    if cur != resource.RLIM_INFINITY:
        soft, hard = min(soft, cur), min(hard, cur)
    resource.setrlimit(kind, (soft, hard))


def run_code(fd: int, uid: int, limits: list[int], python: str, workdir: bytes) -> None:
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
    os.set_inheritable(fd, False)
    say(fd, "limits-set")
    env = dict(os.environ, HOME=workdir.decode(), TMPDIR=workdir.decode())
    os.execve(python, [python, "-I", "-B", "main.py"], env)


def supervise(fd: int, uid: int, workdir: bytes, hide: list[bytes], limits: list[int],
              python: str, unshared: set[str]) -> None:  # fmt: skip
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
            run_code(fd, uid, limits, python, workdir)
        except BaseException as err:  # noqa: BLE001 - reported, then the code is not run
            say(fd, f"setup failed: {err!r}")
        os._exit(125)
    while True:  # reap everything (we may be init) until the code itself exits
        pid, status, usage = os.wait4(-1, 0)
        if pid == code:
            say(fd, f"exit {status} {usage.ru_utime + usage.ru_stime!r}")
            return


def main() -> None:
    fd, uid, isolate = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
    workdir = sys.argv[4].encode()
    hide = [p.encode() for p in sys.argv[5].split(":") if p]
    limits = [int(a) for a in sys.argv[6:10]]
    python = sys.argv[10]
    unshared = unshare(fd) if isolate else set()
    supervisor = os.fork()  # pid 1 of the new pid namespace, when there is one
    if supervisor == 0:
        try:
            supervise(fd, uid, workdir, hide, limits, python, unshared)
        except BaseException as err:  # noqa: BLE001
            say(fd, f"setup failed: {err!r}")
        os._exit(0)  # as pid 1 this SIGKILLs every process left in the namespace
    os.close(fd)
    os.waitpid(supervisor, 0)


if __name__ == "__main__":
    main()
