"""judgelab: audit the evaluators used as rewards when RL trains code models.

The Python API (`judgelab.api`) is exported here lazily: `import judgelab` imports nothing
else, and `judgelab.audit` imports the API (polars, pydantic) on first use, never torch or
Prefect."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "audit": "api",
    "load_tasks": "api",
    "load_candidates": "api",
    "score": "api",
    "analyse": "api",
    "make_settings": "api",
    "AuditResult": "api",
    "Decision": "api",
    "Settings": "config",
    "load_settings": "config",
    "register_reward": "reward",
}
__all__ = [
    "AuditResult", "Decision", "Settings", "__version__", "analyse", "audit", "load_candidates",
    "load_settings", "load_tasks", "make_settings", "register_reward", "score",
]  # fmt: skip


def __getattr__(name: str) -> Any:
    where = _EXPORTS.get(name)
    if where == "api":
        from judgelab import api

        return getattr(api, name)
    if where == "config":
        from judgelab import config

        return getattr(config, name)
    if where == "reward":
        from judgelab.evaluators import reward

        return getattr(reward, name)
    raise AttributeError(f"module 'judgelab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
