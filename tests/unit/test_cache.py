from __future__ import annotations

from pathlib import Path

from judgelab.cache import JsonCache


def test_miss_then_hit(tmp_path: Path) -> None:
    c = JsonCache(tmp_path, "ns")
    key = {"model": "m", "seed": 1}
    assert c.get(key) is None
    c.put(key, {"text": "hello"})
    assert c.get(key) == {"text": "hello"}
    assert (c.hits, c.misses) == (1, 1)


def test_key_order_does_not_matter_but_values_do(tmp_path: Path) -> None:
    c = JsonCache(tmp_path, "ns")
    c.put({"a": 1, "b": 2}, "v")
    assert c.get({"b": 2, "a": 1}) == "v"
    assert c.get({"a": 1, "b": 3}) is None


def test_corrupted_entry_is_detected_and_removed(tmp_path: Path) -> None:
    c = JsonCache(tmp_path, "ns")
    c.put("k", {"text": "good"})
    path = next((tmp_path / "ns").rglob("*.json"))
    path.write_text(path.read_text().replace("good", "evil"))  # checksum no longer matches
    assert c.get("k") is None
    assert not path.exists()
    c.put("k", {"text": "good"})
    path.write_text(path.read_text()[:10])  # torn write
    assert c.get("k") is None


def test_no_temp_files_left_behind(tmp_path: Path) -> None:
    c = JsonCache(tmp_path, "ns")
    for i in range(5):
        c.put(i, i)
    leftovers = [p for p in (tmp_path / "ns").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_seed_answers_a_miss_once_and_is_never_written(tmp_path: Path) -> None:
    seed = JsonCache(tmp_path / "reference", "ns")
    seed.put("k", {"text": "from the reference"})
    seed_files = sorted((tmp_path / "reference").rglob("*.json"))
    c = JsonCache(tmp_path / "here", "ns", seeds=[tmp_path / "reference"])
    assert c.get("k") == {"text": "from the reference"}
    assert c.get("k") == {"text": "from the reference"}  # now copied here
    assert c.get("other") is None
    assert c.counts() == {"hits": 2, "seeded": 1, "misses": 1}
    c.put("new", 1)
    assert sorted((tmp_path / "reference").rglob("*.json")) == seed_files
    assert (tmp_path / "here" / "ns").exists()


def test_a_corrupted_seed_entry_is_a_miss_and_stays_where_it_is(tmp_path: Path) -> None:
    seed = JsonCache(tmp_path / "reference", "ns")
    seed.put("k", {"text": "x"})
    (path,) = (tmp_path / "reference").rglob("*.json")
    path.write_text(path.read_text().replace('"x"', '"forged"'))
    c = JsonCache(tmp_path / "here", "ns", seeds=[tmp_path / "reference"])
    assert c.get("k") is None
    assert path.exists()
    assert c.counts() == {"hits": 0, "seeded": 0, "misses": 1}
