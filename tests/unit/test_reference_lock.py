"""reference/dvc.lock is current: what DVC recorded when the reference's stages ran (or were
`dvc commit`-ed) is what reference/dvc.yaml asks for now, so `make reference` finds every
committed stage done and reruns none.

Each stage's lock entry names the deps dvc.yaml lists, no more and no fewer (a renamed or
removed module leaves its old path in the lock), and `dvc status` finds no dep, param or
output changed since. A change to any module a reference stage imports, or to a param it
lists, makes this fail until the lock is brought current: the stage rerun (`dvc repro`) where
its results may change, or `dvc commit`-ed where they cannot (a change of structure, which
tests/integration/test_golden_tables.py holds to the committed tables); the commit names which.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = Path("reference/dvc.yaml")
LOCK = Path("reference/dvc.lock")


def _paths(entries: list[Any]) -> list[str]:
    """The paths of dvc.yaml deps (a path, or a mapping of a path to its options)."""
    return [e if isinstance(e, str) else next(iter(e)) for e in entries]


def test_the_lock_names_exactly_the_deps_of_each_stage() -> None:
    stages = yaml.safe_load((ROOT / REFERENCE).read_text())["stages"]
    lock = yaml.safe_load((ROOT / LOCK).read_text())["stages"]
    assert sorted(lock) == sorted(stages)
    differ = {}
    for name, body in stages.items():
        wanted = set(_paths(body["deps"]))
        locked = {d["path"] for d in lock[name]["deps"]}
        if wanted != locked:
            differ[name] = {"not in the lock": sorted(wanted - locked),
                            "only in the lock": sorted(locked - wanted)}  # fmt: skip
    assert differ == {}, f"{LOCK} is stale: {json.dumps(differ, indent=1)}"


def test_dvc_finds_every_reference_stage_done() -> None:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "dvc", "status", "--json", str(REFERENCE)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    stale = json.loads(out)
    summary = {
        stage.split(":")[-1]: {kind: sorted(what) for change in changes
                               for kind, what in change.items()}
        for stage, changes in stale.items()
    }  # fmt: skip
    assert stale == {}, f"{LOCK} is stale: {json.dumps(summary, indent=1)}"
