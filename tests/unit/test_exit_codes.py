"""Exit codes a CI can gate on: one table (`judgelab.errors.EXIT_CODES`, docs/OPERATIONS.md),
errors mapped to it, and the audit gate of `judgelab analysis` on figures computed by hand."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from judgelab.analysis import gate
from judgelab.errors import (
    EXIT_BAD_INPUT,
    EXIT_CODES,
    EXIT_GATE,
    EXIT_UNAVAILABLE,
    ConfigError,
    JudgeRequestError,
    ModelError,
    TableError,
    TransientError,
    exit_code,
)
from judgelab.scoring.failures import JudgeCallsFailed

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_the_documented_table_is_the_codes() -> None:
    text = (ROOT / "docs/OPERATIONS.md").read_text()
    rows = dict(re.findall(r"^\| (\d) \| (.+) \|$", text, re.M))
    assert {int(code): meaning for code, meaning in rows.items()} == EXIT_CODES
    assert len(set(EXIT_CODES)) == len(EXIT_CODES) == 5


def test_each_error_has_its_code() -> None:
    assert exit_code(ConfigError("x")) == exit_code(TableError("x")) == EXIT_BAD_INPUT == 2
    assert exit_code(JudgeCallsFailed("x")) == EXIT_UNAVAILABLE == 4  # the table is written
    assert exit_code(ModelError("x")) == exit_code(JudgeRequestError("x", 404)) == 4
    assert exit_code(TransientError("x")) == 4
    assert EXIT_GATE == 3


def _metrics() -> dict:
    """Three judges against the truth: one fit, one that praises failing code, one the audit
    could not measure; the truth itself is not gated."""

    def truth(primary: float | None, praise: float | None, n: int = 20) -> dict:
        return {
            "pairwise_accuracy_strict": primary,
            "pairwise_accuracy_strict_ci_low": None if primary is None else primary - 0.1,
            "pairwise_accuracy_strict_ci_high": None if primary is None else primary + 0.1,
            "pairwise_accuracy_strict_n_groups": n,
            "pairwise_accuracy_strict_ci_reason": None if primary else "no mixed group",
            "false_praise_rate": praise,
            "false_praise_rate_n_groups": n,
        }

    return {
        "settings": {"primary": "pairwise_accuracy_strict"},
        "execution_truth": {"evaluator": "execution"},
        "evaluators": {
            "execution": {"truth": truth(1.0, 0.0)},
            "fit": {"truth": truth(0.8, 0.05)},
            "praising": {"truth": truth(0.6, 0.4)},
            "blind": {"truth": truth(None, None, 0)},
            "no-truth": {"truth": None},
        },
    }


def test_the_gate_refuses_by_hand_computed_thresholds() -> None:
    found = gate.check(_metrics(), gate.Gate(fail_below=0.7, fail_above_praise=0.3))
    got = {(v.judge, v.figure): (v.value, v.side) for v in found}
    assert got == {
        ("praising", "pairwise_accuracy_strict"): (0.6, "below"),  # 0.6 < 0.7
        ("praising", "false_praise_rate"): (0.4, "above"),  # 0.4 > 0.3
        ("blind", "pairwise_accuracy_strict"): (None, "below"),  # unmeasured fails
        ("blind", "false_praise_rate"): (None, "above"),
    }
    line = next(v for v in found if v.judge == "praising" and v.side == "below").message()
    assert line == (
        "praising: pairwise_accuracy_strict 0.600, 95 % CI [0.500, 0.700] over 20 groups is "
        "below 0.7"
    )
    blind = next(v for v in found if v.judge == "blind" and v.side == "below").message()
    assert "no mixed group; unmeasured" in blind
    # at the threshold is not past it; one judge named: only it is gated
    assert gate.check(_metrics(), gate.Gate(fail_below=0.6, judges=("praising",))) == []
    assert gate.check(_metrics(), gate.Gate()) == []


def test_the_gate_names_bad_judges_and_thresholds() -> None:
    with pytest.raises(ConfigError, match="--judge nope: not an evaluator"):
        gate.check(_metrics(), gate.Gate(fail_below=0.5, judges=("nope",)))
    with pytest.raises(ConfigError, match="--judge execution: has no figures against the"):
        gate.check(_metrics(), gate.Gate(fail_below=0.5, judges=("execution",)))
    with pytest.raises(ConfigError, match="--fail-below 2.0: must be between -1 and 1"):
        gate.Gate(fail_below=2.0)


def test_the_analysis_command_exits_3_naming_the_refused_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's own logic: the stage (stubbed: the flow is tested elsewhere) writes
    metrics.json; the gate reads it and the command exits 3, or 0 when every judge passes."""
    from judgelab_cli import app, stages

    out = tmp_path / "data" / "analysis"
    out.mkdir(parents=True)
    (out / "metrics.json").write_text(json.dumps(_metrics()))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(stages, "run", lambda stage, params: None)
    runner = CliRunner()
    refused = runner.invoke(app, ["analysis", "--fail-above-praise", "0.3", "--judge", "praising"])
    assert refused.exit_code == EXIT_GATE, refused.output
    assert "gate: praising: false_praise_rate 0.400 over 20 groups is above 0.3" in refused.output
    passed = runner.invoke(app, ["analysis", "--fail-below", "0.7", "--judge", "fit"])
    assert passed.exit_code == 0 and "every gated judge passed" in passed.output
    bad = runner.invoke(app, ["analysis", "--fail-below", "5"])
    assert bad.exit_code == EXIT_BAD_INPUT and "between -1 and 1" in bad.output


def test_a_console_script_exits_2_on_bad_params(tmp_path: Path) -> None:
    bad = tmp_path / "params.yaml"
    bad.write_text("models: {}\nscores: {evaluators: []}\nrollouts: {nope: 1}\n")
    env = {**os.environ, "JUDGELAB_ROOT": str(tmp_path)}
    proc = subprocess.run([str(BIN / "judgelab"), "analysis", "-p", str(bad)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == EXIT_BAD_INPUT and "rollouts.nope" in proc.stderr
