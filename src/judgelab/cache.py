"""A content-addressed, crash-safe JSON cache.

The key is the sha256 of a canonical JSON of exactly the inputs that change the output
(never timeouts or retry counts). Each entry is written atomically and stores its own key
and a checksum of its value, so a torn or corrupted entry is detected, logged, deleted and
recomputed instead of being trusted.
"""

from __future__ import annotations

import hashlib
import json
import logging
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

    def __init__(self, root: Path, namespace: str) -> None:
        self.root = Path(root) / namespace
        self.hits = 0
        self.misses = 0

    def _path(self, key_hash: str) -> Path:
        return self.root / key_hash[:2] / f"{key_hash}.json"

    def key_hash(self, key: Any) -> str:
        return digest(key)

    def get(self, key: Any) -> Any | None:
        """The cached value, or None on a miss or a corrupted entry (which is removed)."""
        h = self.key_hash(key)
        path = self._path(h)
        if not path.exists():
            self.misses += 1
            return None
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            ok = entry.get("key") == h and entry.get("checksum") == digest(entry.get("value"))
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            ok = False
        if not ok:
            log.warning("cache entry %s is corrupted; recomputing", path)
            path.unlink(missing_ok=True)
            self.misses += 1
            return None
        self.hits += 1
        return entry["value"]

    def put(self, key: Any, value: Any) -> None:
        h = self.key_hash(key)
        entry = {"key": h, "checksum": digest(value), "value": value}
        write_text(self._path(h), canonical_json(entry))

    def __contains__(self, key: Any) -> bool:
        return self._path(self.key_hash(key)).exists()
