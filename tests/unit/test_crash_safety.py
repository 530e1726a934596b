"""Crash safety of what judgelab writes: a table killed mid-write is the old one or the new
one, never half; a corrupted cache entry is detected and recomputed through the model."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import polars as pl  # noqa: E402

from judgelab.cache import JsonCache  # noqa: E402
from judgelab.evaluators.rubric import RubricJudge  # noqa: E402
from support.openai_server import OpenAIServer, ok  # noqa: E402
from tests.unit.test_judges import TASK, candidates, endpoint, rubric_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

WRITER = """
import sys
from pathlib import Path
import polars as pl
from judgelab.io import write_parquet
path = Path(sys.argv[1])
frames = [pl.DataFrame({"v": [v] * 400_000, "x": list(range(400_000))}) for v in (1, 2)]
print("ready", flush=True)
i = 0
while True:
    write_parquet(path, frames[i % 2])
    i += 1
"""


def test_a_table_killed_mid_write_is_old_or_new_never_half(tmp_path: Path) -> None:
    path = tmp_path / "table.parquet"
    for delay in (0.3, 0.7, 1.1):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if path.exists():  # the first write may not have finished yet
            frame = pl.read_parquet(path)
            assert frame.height == 400_000 and frame["v"].n_unique() == 1
    assert path.exists(), "no write finished in 2 s"
    # an interrupted write leaves at most a hidden temporary sibling, never the table name
    assert {p.name for p in tmp_path.iterdir() if not p.name.startswith(".")} == {path.name}


def test_a_corrupted_judge_cache_entry_is_recomputed(tmp_path: Path) -> None:
    cand = candidates(1)[0]
    with OpenAIServer(lambda body: ok('{"explanation": "fine", "score": 0.75}')) as server:
        first = RubricJudge(rubric_spec(), endpoint(server), JsonCache(tmp_path, "judge"))
        assert first.score_group(TASK, [cand])[0].score == 0.75
        (entry,) = (tmp_path / "judge").rglob("*.json")
        entry.write_text(entry.read_text()[:40])  # torn by a crash
        again = RubricJudge(rubric_spec(), endpoint(server), JsonCache(tmp_path, "judge"))
        assert again.score_group(TASK, [cand])[0].score == 0.75
        assert len(server.requests) == 2  # the bad entry was not trusted
        third = RubricJudge(rubric_spec(), endpoint(server), JsonCache(tmp_path, "judge"))
        assert third.score_group(TASK, [cand])[0].score == 0.75
        assert len(server.requests) == 2  # and the recomputed entry is good again
