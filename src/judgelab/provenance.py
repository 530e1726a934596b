"""What a report was computed from: the code's commit, the parameters file's hash and the
weights of every model the audit used. Shown at the top of the report, kept out of
metrics.json (which must not change when only the commit does)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

from judgelab.config import EmbeddedModel, Settings

# What running the pipeline itself writes into tracked files: dvc's lock files, the
# .gitignore entries it adds beside its outputs, and the outputs under data/ where a project
# commits them (the reference audit does; dvc deletes a stage's outputs before it runs it). A
# change there is not a change of the code.
PIPELINE_BOOKKEEPING = (
    ":(exclude,glob)**/dvc.lock",
    ":(exclude,glob)**/.gitignore",
    ":(exclude,glob)data/**",
)


def git_commit(root: Path) -> dict[str, Any] | None:
    """HEAD of the repository holding `root`, and whether tracked files differ from it (the
    pipeline's own bookkeeping left out, so a fresh `make run` is not "uncommitted"); None
    outside a git repository (or without git)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        )
        if head.returncode:
            return None
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
             *PIPELINE_BOOKKEEPING],
            cwd=root, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def model_fingerprints(settings: Settings, names: list[str]) -> dict[str, str]:
    """Registry name -> the sha256 of an embedded model's GGUF (pinned in the zoo), or an
    endpoint's URL and model name (judgelab cannot see a remote model's weights)."""
    from judgelab.models.zoo import ZOO

    out = {}
    for name in names:
        spec = settings.model(name)
        if isinstance(spec, EmbeddedModel):
            out[name] = f"sha256:{ZOO[spec.zoo].sha256}"
        else:
            out[name] = f"endpoint:{spec.base_url.rstrip('/')}|{spec.model}"
    return out


def provenance(settings: Settings, params: Path, root: Path, models: list[str]) -> dict[str, Any]:
    return {
        "git": git_commit(root),
        "params": str(params),
        "params_sha256": hashlib.sha256(Path(params).read_bytes()).hexdigest(),
        "models": model_fingerprints(settings, models),
    }
