"""docs/MODELS.md's sizes and hashes are the ones src/judgelab/models/zoo.py pins and checks."""

from __future__ import annotations

import re
from pathlib import Path

from judgelab.models.zoo import ZOO

DOC = Path(__file__).resolve().parents[2] / "docs" / "MODELS.md"


def hash_rows() -> dict[str, tuple[str, int | None, str]]:
    section = DOC.read_text().split("## Sizes and hashes", 1)[1]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| ([0-9,]+|not pinned) \| `([0-9a-f]{64})` \|$",
                      section, re.M)  # fmt: skip
    return {
        name: (filename, None if size == "not pinned" else int(size.replace(",", "")), sha)
        for name, filename, size, sha in rows
    }


def test_every_zoo_model_has_its_pinned_file_size_and_hash() -> None:
    assert hash_rows() == {m.name: (m.filename, m.size, m.sha256) for m in ZOO.values()}


def test_every_zoo_model_is_in_each_table() -> None:
    text = DOC.read_text()
    for name in ZOO:
        assert text.count(f"| `{name}` |") == 3, name  # packages, hashes; upstream by zoo name
