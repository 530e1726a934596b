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
