"""The report's provenance line: commit (and uncommitted changes), params hash, model weights."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import yaml

from judgelab.config import parse_settings
from judgelab.provenance import git_commit, provenance
from judgelab.report.audit import provenance_line

ROOT = Path(__file__).resolve().parents[2]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


def test_commit_and_uncommitted_changes(tmp_path: Path) -> None:
    assert git_commit(tmp_path) is None  # not a repository
    git(tmp_path, "init", "-q")
    (tmp_path / "params.yaml").write_text("a: 1\n")
    git(tmp_path, "add", "params.yaml")
    git(tmp_path, "commit", "-q", "-m", "c")
    head = git(tmp_path, "rev-parse", "HEAD")
    assert git_commit(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "untracked.txt").write_text("x")  # untracked files are not the code
    assert git_commit(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "params.yaml").write_text("a: 2\n")
    assert git_commit(tmp_path) == {"commit": head, "dirty": True}


def test_what_the_pipeline_writes_itself_is_not_an_uncommitted_change(tmp_path: Path) -> None:
    """dvc's lock file and the .gitignore entries it adds beside its outputs change on every
    first `dvc repro` of a clone, and committed outputs under data/ on every run of their
    stage: the report of a fresh `make run` is not "uncommitted"."""
    git(tmp_path, "init", "-q")
    (tmp_path / "data" / "scores").mkdir(parents=True)
    for name in ("dvc.lock", "data/scores/.gitignore", "code.py"):
        (tmp_path / name).write_text("")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "c")
    head = git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "dvc.lock").write_text("stages: {}\n")
    (tmp_path / "data" / "scores" / ".gitignore").write_text("/scores.parquet\n")
    assert git_commit(tmp_path) == {"commit": head, "dirty": False}
    # a project that commits its outputs (the reference audit): dvc deletes them before a stage
    (tmp_path / "data" / "scores" / "report.md").write_text("old")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "outputs")
    head = git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "data" / "scores" / "report.md").unlink()
    assert git_commit(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "code.py").write_text("x = 1\n")
    assert git_commit(tmp_path) == {"commit": head, "dirty": True}


def test_params_hash_and_model_weights(tmp_path: Path) -> None:
    params = tmp_path / "params.yaml"
    params.write_bytes((ROOT / "params.yaml").read_bytes())
    settings = parse_settings(yaml.safe_load(params.read_text()))
    p = provenance(settings, params, tmp_path, ["qwen-1.5b"])
    assert p["params_sha256"] == hashlib.sha256(params.read_bytes()).hexdigest()
    # the sha256 of the official GGUF, pinned in the zoo (the brief's value)
    assert p["models"] == {
        "qwen-1.5b": "sha256:cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    }
    line = provenance_line({**p, "git": {"commit": "0123456789abcdef", "dirty": True}})
    assert line is not None
    assert line.startswith("Computed from commit `0123456789ab` with uncommitted changes;")
    assert f"sha256 `{p['params_sha256'][:16]}`" in line
    assert "qwen-1.5b `sha256:cc324af0" in line
    assert "not a git checkout" in (provenance_line(p) or "")
    assert provenance_line(None) is None


def test_the_report_says_where_each_call_came_from(tmp_path: Path) -> None:
    from judgelab.flows.analysis import cache_calls
    from judgelab.io import write_json
    from judgelab.report.audit import calls_sentence

    write_json(tmp_path / "rollouts" / "calls.json",
               {"completions": {"hits": 120, "seeded": 100, "misses": 0}})  # fmt: skip
    write_json(tmp_path / "scores" / "calls.json",
               {"judge": {"hits": 900, "seeded": 0, "misses": 1100}})  # fmt: skip
    calls = cache_calls(tmp_path / "rollouts" / "r.parquet", tmp_path / "scores" / "s.parquet")
    assert calls_sentence(calls["calls"]) == (
        " Of 120 policy samples, 120 came from a cache (100 from a seed: cache.seeds) and 0 "
        "from a model; of 2,000 judge calls, 900 came from a cache and 1,100 from a model."
    )
    assert cache_calls(tmp_path / "nowhere" / "x.parquet") == {}
    assert calls_sentence(None) == ""
