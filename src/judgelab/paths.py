"""Where judgelab keeps things. Everything lives under the project root, git-ignored."""

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
