"""Headless Chromium (Debian's package) for tests that open judgelab's HTML in a browser.

`chromium` (fixture) finds the browser or installs it with apt-get when running as root;
it skips, saying why, only where that is impossible. `headless(...)` runs it with the
network cut off: every host name is unresolvable, so a page that needs a CDN shows it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def find_chromium() -> str | None:
    return next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's chromium; installed here (apt-get, as root) when missing."""
    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and apt-get as root is not available")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600"]
    subprocess.run([*apt, "update", "-q"], env=env, capture_output=True, timeout=900)
    proc = subprocess.run(
        [*apt, "install", "-y", "-q", "chromium"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    found = find_chromium()
    if proc.returncode != 0 or not found:
        pytest.skip(f"apt-get install chromium failed: {proc.stderr[-500:]}")
    return found


def headless(
    chromium: str, *args: str, resolve_only: str | None = None, budget_ms: int = 5000
) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium; no host name resolves except `resolve_only` (a loopback
    server under test), so a page that needs a CDN script or font cannot get it."""
    rules = "MAP * ~NOTFOUND" + (f", EXCLUDE {resolve_only}" if resolve_only else "")
    return subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",  # root in a container
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--hide-scrollbars",
            f"--host-resolver-rules={rules}",
            f"--virtual-time-budget={budget_ms}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
