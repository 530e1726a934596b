"""The private event loop every judge call runs on, and `run_sync` to call it from sync code.

One loop per process, in a daemon thread: litellm keeps per-loop state (its logging worker),
so a fresh ``asyncio.run`` per call makes it drop queued callbacks, and concurrent loops from
several Prefect threads make it thrash. `run_sync` is safe from any thread, and from inside
another running loop; a fork gets a loop of its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")

_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_loop_pid: int | None = None


def _judge_loop() -> asyncio.AbstractEventLoop:
    """One event loop per process, in a daemon thread, shared by every judge call.

    litellm keeps per-loop state (its logging worker); a fresh ``asyncio.run`` per call makes it
    drop queued callbacks, and concurrent loops from several Prefect threads make it thrash.
    """
    global _loop, _loop_pid
    with _loop_lock:
        if _loop is None or _loop.is_closed() or _loop_pid != os.getpid():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="judgelab-judges", daemon=True)
            thread.start()
            _loop, _loop_pid = loop, os.getpid()
        return _loop


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` on the judge loop and wait for it; safe from any thread or inside a loop."""
    loop = _judge_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        coro.close()
        raise RuntimeError("a judge was called synchronously from the judge loop itself")
    return asyncio.run_coroutine_threadsafe(coro, loop).result()
