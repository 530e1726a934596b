"""`judgelab checkpoint list`: each checkpoint with the held-out pass rate of its policy."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from judgelab_cli import app


def _checkpoint(root: Path, judge: str, steps: int, history: list[dict]) -> None:
    d = root / judge / "checkpoints" / f"step-{steps:03d}"
    d.mkdir(parents=True)
    body = {"steps": steps, "done": False, "history": history}
    (d / "state.json").write_text(json.dumps(body))


def test_list_shows_rate_n_and_untested_policies(tmp_path: Path) -> None:
    row = lambda e, rate, n: {"epoch": e, "heldout_pass_rate": rate, "heldout_n": n}  # noqa: E731
    _checkpoint(tmp_path, "execution", 1, [row(0, 0.5, 4), row(1, 0.75, 4)])
    # every held-out sample of policy_1 was a sandbox error: no rate, not a crash
    _checkpoint(tmp_path, "ruler", 1, [row(0, 0.5, 4), row(1, None, 0)])
    _checkpoint(tmp_path, "rubric", 2, [row(0, 0.5, 4), row(1, 0.5, 4)])
    out = CliRunner().invoke(app, ["checkpoint", "list", "--root", str(tmp_path)])
    assert out.exit_code == 0, out.output
    lines = {line.split()[0]: line for line in out.output.splitlines()}
    assert "held-out 0.75 (n=4)" in lines["execution"]
    assert "held-out untested" in lines["ruler"]
    assert "not evaluated yet" in lines["rubric"]  # step-002 holds policy_2, no row 2 yet


def test_list_and_pick_the_runs_of_several_training_seeds(tmp_path: Path) -> None:
    """With train.seeds each (judge, seed) has its own checkpoints under <judge>/seed-<s>/;
    generate and export need --train-seed for such a judge, and say which seeds exist."""
    import pytest
    from typer import BadParameter

    from judgelab_cli.checkpoint import _checkpoint as pick

    row = lambda e, rate: {"epoch": e, "heldout_pass_rate": rate, "heldout_n": 4}  # noqa: E731
    _checkpoint(tmp_path / "ruler", "seed-1", 1, [row(0, 0.5), row(1, 0.25)])
    _checkpoint(tmp_path / "ruler", "seed-2", 1, [row(0, 0.5), row(1, 1.0)])
    _checkpoint(tmp_path, "execution", 1, [row(0, 0.5), row(1, 0.75)])
    out = CliRunner().invoke(app, ["checkpoint", "list", "--root", str(tmp_path)])
    assert out.exit_code == 0, out.output
    lines = {line.split()[0]: line for line in out.output.splitlines()}
    assert sorted(lines) == ["execution", "ruler/seed-1", "ruler/seed-2"]
    assert "held-out 0.25 (n=4)" in lines["ruler/seed-1"]
    assert "held-out 1.00 (n=4)" in lines["ruler/seed-2"]
    step = tmp_path / "ruler" / "seed-2" / "checkpoints" / "step-001"
    (step / "adapter_model.safetensors").write_bytes(b"")
    assert pick(tmp_path, "ruler", 2, 1) == step
    assert pick(tmp_path, "ruler", 2, None) == step  # the newest
    assert pick(tmp_path, "execution", None, None).parent == tmp_path / "execution" / "checkpoints"
    for judge, seed, message in [
        ("ruler", None, r"ruler was trained with seeds \[1, 2\]: choose one"),
        ("ruler", 3, r"ruler has seeds \[1, 2\]"),
        ("execution", 1, r"execution has no seeds \(a single-seed run\)"),
    ]:
        with pytest.raises(BadParameter, match=message):
            pick(tmp_path, judge, seed, None)
