"""The optional extras and what each brings: a slim `pip install judgelab` audits endpoint
judges in one process (the Python API, `judgelab audit`, `judgelab gate`, the reward guard:
tasks, scores, the execution truth, analysis, the report); the stage pipeline (Prefect flows,
DVC, MLflow), training, the embedded llama.cpp models and Dask each need an extra.

`require(extra, purpose)` is called where a command first needs one: it looks the extra's
modules up without importing them, and when one is missing raises `MissingExtraError`,
which names the extra to install (exit code 2, bad input: the params ask for what the
install lacks). Standard library only, so the slim install's import guard
(tests/unit/test_slim_imports.py) holds it to nothing heavy.
"""

from __future__ import annotations

import importlib.util

from judgelab.errors import MissingExtraError

# extra -> the top-level modules its packages bring (pyproject.toml's optional-dependencies)
EXTRAS: dict[str, tuple[str, ...]] = {
    "pipeline": ("prefect", "dvc", "mlflow"),
    "train": ("torch", "transformers", "peft", "gguf"),
    "embedded": ("llama_cpp",),
    "dask": ("prefect_dask",),
}


# what the core install runs instead of the pipeline's stages
ONE_PROCESS = "judgelab audit --tasks ... --candidates ... --params params.yaml"


def missing(extra: str) -> list[str]:
    """The modules of `extra` this environment lacks (none imported to find out)."""
    if extra not in EXTRAS:
        raise ValueError(f"unknown extra {extra!r}; choose from {sorted(EXTRAS)}")
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def install_hint(extra: str) -> str:
    return f"pip install 'judgelab[{extra}]'"


def require(extra: str, purpose: str) -> None:
    """Raise `MissingExtraError` naming the extra when any of its modules is missing."""
    if lacking := missing(extra):
        instead = f"; or, in one process: {ONE_PROCESS}" if extra == "pipeline" else ""
        raise MissingExtraError(
            f"{purpose} needs the '{extra}' extra, which this environment lacks "
            f"(no module {', '.join(lacking)}): {install_hint(extra)}{instead} "
            "(a checkout: make install brings every extra)"
        )
