"""A content-addressed, crash-safe JSON cache.

The key is the sha256 of a canonical JSON of exactly the inputs that change the output
(never timeouts or retry counts). Each entry is written atomically and stores its own key
and a checksum of its value, so a torn or corrupted entry is detected, logged, deleted and
recomputed instead of being trusted.

Seeds: other caches read before a call is made (`cache.seeds` in params.yaml; the default
project reads the committed reference audit's). A miss here that a seed holds is verified
like any entry, copied here and counted apart (`seeded`), so a report can say how many of
its calls came from where; a seed is never written.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from judgelab.io import write_text

log = logging.getLogger(__name__)


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode("utf-8")).hexdigest()


class JsonCache:
    """Maps a key (any JSON-able object) to a JSON value, one file per entry."""

    def __init__(self, root: Path, namespace: str, seeds: Sequence[Path] = ()) -> None:
        self.root = Path(root) / namespace
        self.seeds = [Path(seed) / namespace for seed in seeds if Path(seed) != Path(root)]
        self.hits = 0  # found here (seeded ones included)
        self.seeded = 0  # of those, first found in a seed
        self.misses = 0

    def _path(self, key_hash: str) -> Path:
        return self.root / key_hash[:2] / f"{key_hash}.json"

    def key_hash(self, key: Any) -> str:
        return digest(key)

    def get(self, key: Any) -> Any | None:
        """The cached value, or None on a miss or a corrupted entry (which is removed)."""
        return self.lookup(key)[0]

    def lookup(self, key: Any) -> tuple[Any | None, bool]:
        """`get`'s value, and whether it was first found in a seed (and copied here)."""
        h = self.key_hash(key)
        path = self._path(h)
        if path.exists():
            entry = _verified(path, h)
            if entry is not None:
                self.hits += 1
                return entry["value"], False
            log.warning("cache entry %s is corrupted; recomputing", path)
            path.unlink(missing_ok=True)
        for seed in self.seeds:
            seeded = seed / path.relative_to(self.root)
            entry = _verified(seeded, h) if seeded.exists() else None
            if entry is not None:
                self.put(key, entry["value"])
                self.hits += 1
                self.seeded += 1
                return entry["value"], True
        self.misses += 1
        return None, False

    def counts(self) -> dict[str, int]:
        """What this cache answered: lookups found here, first found in a seed, and missed."""
        return {"hits": self.hits, "seeded": self.seeded, "misses": self.misses}

    def put(self, key: Any, value: Any) -> None:
        h = self.key_hash(key)
        entry = {"key": h, "checksum": digest(value), "value": value}
        write_text(self._path(h), canonical_json(entry))

    def __contains__(self, key: Any) -> bool:
        return self._path(self.key_hash(key)).exists()


def summed(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    """Several caches' `counts()`, added up."""
    total = {"hits": 0, "seeded": 0, "misses": 0}
    for c in counts:
        for key in total:
            total[key] += c[key]
    return total


def _verified(path: Path, key_hash: str) -> dict[str, Any] | None:
    """The entry at `path` when it is whole and is the one for `key_hash`, else None."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
        ok = entry.get("key") == key_hash and entry.get("checksum") == digest(entry.get("value"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        return None
    return entry if ok else None
