"""Atomic file writes (a reader sees the old file or the new one, never half of one), and the
records of a user's JSONL or parquet file."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import polars as pl
from pydantic import BaseModel, ValidationError

from judgelab.errors import ConfigError


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling of `path`; rename it onto `path` only if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


@contextmanager
def atomic_dir(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling directory; rename it onto `path` only if the block succeeds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_parquet(path: Path, frame: pl.DataFrame) -> None:
    with atomic_path(path) as tmp:
        frame.write_parquet(tmp)


def read_records(path: Path, where: str) -> list[tuple[str, Any]]:
    """(place, record) for every record of a user's .jsonl or .parquet file; the place names
    the line or row, and every error names `where` (the setting), the file and the place."""
    if not path.is_file():
        raise ConfigError(f"{where}: no such file: {path}")
    if path.suffix == ".jsonl":
        out = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append((f"line {n}", json.loads(line)))
            except json.JSONDecodeError as err:
                raise ConfigError(f"{where} ({path}) line {n}: not JSON: {err.msg}") from None
        return out
    if path.suffix == ".parquet":
        try:
            frame = pl.read_parquet(path)
        except Exception as err:  # noqa: BLE001 (polars raises several kinds)
            raise ConfigError(f"{where} ({path}): not a parquet file: {err}") from None
        return [(f"row {n}", row) for n, row in enumerate(frame.iter_rows(named=True), 1)]
    raise ConfigError(f"{where} ({path}): the file must be .jsonl or .parquet")


M = TypeVar("M", bound=BaseModel)


def validated_records(
    path: Path, where: str, model: type[M], what: str, json_field: str
) -> Iterator[tuple[str, M]]:
    """(place, record as `model`) for every record of the file (`read_records`), in order.
    A record that is not an object, a `json_field` given as JSON text (parquet's way of
    holding a list) that is not JSON, or a record `model` refuses is a ConfigError naming the
    setting, the file, the place and the field; `what` names a record ("a task")."""
    for place, record in read_records(path, where):
        if isinstance(record, dict) and isinstance(record.get(json_field), str):
            try:
                record = {**record, json_field: json.loads(record[json_field])}
            except json.JSONDecodeError as err:
                raise ConfigError(
                    f"{where} ({path}) {place}: field {json_field!r}: not JSON: {err.msg}"
                ) from None
        yield place, validated_record(record, model, f"{where} ({path}) {place}", what)


def validated_record(record: Any, model: type[M], where: str, what: str) -> M:
    """One record (a mapping; None values count as unset) as `model`; else a ConfigError
    naming `where` and the field: what files and in-memory records (the Python API) share."""
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: {what} is a JSON object (got {type(record).__name__})")
    try:
        return model.model_validate({k: v for k, v in record.items() if v is not None})
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "<row>"
        raise ConfigError(f"{where}: field {field!r}: {first['msg']}") from None
