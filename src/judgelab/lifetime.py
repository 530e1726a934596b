"""Child processes that end with judgelab, even when judgelab itself is killed with kill -9.

`die_with_parent` is a `preexec_fn` for `subprocess.Popen`: in the child, before exec, it asks
the kernel (prctl PR_SET_PDEATHSIG) for SIGKILL when the thread that started it exits. Every
long-lived helper judgelab starts — the embedded llama.cpp server, the temporary Prefect API
server — uses it, so a crashed or killed stage leaves nothing running: an orphaned model
server would keep its model loaded and make the next run's server ~300x slower.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal

PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the parent dies, even by kill -9."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
