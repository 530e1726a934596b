"""Environment for a judgelab subprocess working on a scratch project."""

from __future__ import annotations

import os
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def scratch_env(project: Path, **extra: str) -> dict[str, str]:
    """This environment without the checkout's Prefect/MLflow/judgelab settings, the venv
    first on PATH and JUDGELAB_ROOT at `project` (so every state file lands there). A Prefect
    API server this process names (PREFECT_API_URL: the test session's) is kept: the stage
    commands run their flows against it instead of starting a temporary server each."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PREFECT_", "MLFLOW_", "JUDGELAB_")) or k == "PREFECT_API_URL"
    }
    env.update(PATH=f"{BIN}:{env['PATH']}", JUDGELAB_ROOT=str(project), **extra)
    return env
