"""Where judgelab keeps things. Everything lives under the project root, git-ignored; and the
small files a stage writes beside its table, which the analysis reads for the report's
provenance (they are no DVC outputs: a second run of the same stage finds everything cached)."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The directory holding params.yaml: $JUDGELAB_ROOT, else the nearest parent of cwd."""
    env = os.environ.get("JUDGELAB_ROOT")
    if env:
        return Path(env).resolve()
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / "params.yaml").exists():
            return candidate
    return here


def cache_dir() -> Path:
    """Content-addressed caches (rollouts, judge calls): $JUDGELAB_CACHE or <root>/.cache."""
    env = os.environ.get("JUDGELAB_CACHE")
    return Path(env).resolve() if env else project_root() / ".cache"


def models_dir() -> Path:
    """Assembled, verified GGUF files. Shared across checkouts: $JUDGELAB_MODELS or ~/.cache."""
    env = os.environ.get("JUDGELAB_MODELS")
    return Path(env).resolve() if env else Path.home() / ".cache" / "judgelab" / "models"


def calls_file(table: Path) -> Path:
    """Beside a stage's table: what its caches answered (`JsonCache.counts`), for the report."""
    return Path(table).with_name("calls.json")


def structured_output_path(scores: Path) -> Path:
    """Beside the scores table: the structured-output mode found for each ``auto`` judge
    endpoint (`judgelab.scores_stage`), which the report's provenance names."""
    return Path(scores).with_name("structured_output.json")
