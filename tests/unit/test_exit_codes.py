"""Exit codes a CI can gate on: one table (`judgelab.errors.EXIT_CODES`, docs/OPERATIONS.md),
errors mapped to it, and the audit gate (`judgelab gate`) on figures and CIs set by hand."""

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
    """Judges against the truth, each figure with a hand-set CI: one fit, one that praises
    failing code within its groups, one whose CI straddles, one the audit could not measure,
    one resting on too few groups; the truth itself is not gated."""

    def fig(name: str, value: float | None, half: float | None, n: int) -> dict:
        low = None if value is None or half is None else value - half
        high = None if value is None or half is None else value + half
        reason = "no mixed group" if value is None else None
        if value is not None and half is None:
            reason = f"n = {n} groups: too few for a CI (minimum 15)"
        return {name: value, f"{name}_ci_low": low, f"{name}_ci_high": high,
                f"{name}_n_groups": n, f"{name}_ci_reason": reason}  # fmt: skip

    def truth(primary, within, absolute, half=0.05, n=20) -> dict:  # noqa: ANN001
        return {**fig("signal_fidelity", primary, half, n),
                **fig("false_praise_within_group", within, half, n),
                **fig("false_praise_absolute", absolute, half, n)}  # fmt: skip

    return {
        "settings": {"primary": "signal_fidelity", "min_ci_groups": 15},
        "execution_truth": {"evaluator": "execution"},
        "evaluators": {
            "execution": {"truth": truth(1.0, 0.0, 0.0)},
            "fit": {"truth": truth(0.30, 0.10, 0.05)},  # CIs [0.25, 0.35] [0.05, 0.15] [0, .1]
            "praising": {"truth": truth(0.20, 0.60, 0.05)},  # within-group [0.55, 0.65]
            "straddling": {"truth": truth(0.12, 0.30, 0.05, half=0.1)},  # [0.02, 0.22]
            "blind": {"truth": truth(None, None, None, n=0)},
            "few": {"truth": truth(0.9, 0.0, 0.0, half=None, n=4)},  # no CI under 15 groups
            "no-truth": {"truth": None},
        },
    }


def _outcomes(rule: gate.Gate) -> dict[tuple[str, str], str]:
    return {(f.judge, f.figure): f.outcome for f in gate.check(_metrics(), rule)}


def test_the_gate_compares_cis_not_point_estimates() -> None:
    """Threshold 0.24 on signal fidelity: fit's CI [0.25, 0.35] lies clear of it,
    praising's [0.15, 0.25] straddles it (passes, undecided), straddling's [0.02, 0.22] lies
    wholly below; at 0.1 straddling's CI spans the threshold: undecided, not failed."""
    got = _outcomes(gate.Gate(fail_below=0.24))
    assert got == {
        ("blind", "signal_fidelity"): "unmeasured",
        ("few", "signal_fidelity"): "too_few_groups",  # 0.9, yet on 4 groups: not passed
        ("fit", "signal_fidelity"): "pass",
        ("praising", "signal_fidelity"): "undecided",
        ("straddling", "signal_fidelity"): "fail",
    }
    at_01 = _outcomes(gate.Gate(fail_below=0.1, judges=("straddling", "praising")))
    assert at_01 == {("straddling", "signal_fidelity"): "undecided",
                     ("praising", "signal_fidelity"): "pass"}  # fmt: skip
    # the point estimate 0.20 is below 0.21, but the CI [0.15, 0.25] is not wholly below
    assert _outcomes(gate.Gate(fail_below=0.21, judges=("praising",))) == {
        ("praising", "signal_fidelity"): "undecided"
    }


def test_the_two_false_praise_absolutes_are_gated_apart() -> None:
    """praising praises failing code within its groups (0.60) but rarely above the absolute
    threshold (0.05): only the within-group gate refuses it."""
    within = _outcomes(gate.Gate(fail_above_praise_within_group=0.4, judges=("praising",)))
    assert within == {("praising", "false_praise_within_group"): "fail"}
    absolute = _outcomes(gate.Gate(fail_above_praise_absolute=0.4, judges=("praising",)))
    assert absolute == {("praising", "false_praise_absolute"): "pass"}
    found = gate.check(_metrics(), gate.Gate(fail_above_praise_within_group=0.4,
                                             judges=("praising",)))  # fmt: skip
    assert found[0].message() == (
        "praising: false_praise_within_group 0.600, 95 % CI [0.550, 0.650] over 20 groups "
        "lies wholly above 0.4"
    )


def test_the_gate_says_why_it_cannot_pass() -> None:
    rule = gate.Gate(fail_below=0.5, judges=("few", "blind"))
    few, blind = gate.check(_metrics(), rule)
    assert few.refused and blind.refused
    assert few.message() == (
        "few: signal_fidelity 0.900 over 4 groups, no CI to place it (n = 4 groups: too few "
        "for a CI (minimum 15)); the gate (fail below 0.5) does not pass a figure it cannot "
        "place"
    )
    assert "no mixed group; unmeasured" in blind.message()
    assert gate.check(_metrics(), gate.Gate()) == []
    # a CI drawn from fewer groups than the audit's minimum (an older audit's): not passed
    fit = _metrics()["evaluators"]["fit"]["truth"]
    small = gate.judge("fit", fit, "signal_fidelity", 0.1, "below", min_ci_groups=25)
    assert (small.outcome, small.n_groups) == ("too_few_groups", 20)
    assert "20 groups, fewer than analysis.min_ci_groups = 25" in small.message()


def test_the_gate_names_bad_judges_and_thresholds() -> None:
    valid = "judges to gate: ['blind', 'few', 'fit', 'praising', 'straddling']"
    with pytest.raises(ConfigError, match=re.escape(f"--judge nope: not an evaluator of this "
                                                    f"audit; {valid}")):  # fmt: skip
        gate.check(_metrics(), gate.Gate(fail_below=0.5, judges=("nope",)))
    with pytest.raises(ConfigError, match="--judge execution: has no figures against the"):
        gate.check(_metrics(), gate.Gate(fail_below=0.5, judges=("execution",)))
    with pytest.raises(ConfigError, match="--fail-below 2.0: must be between -1 and 1"):
        gate.Gate(fail_below=2.0)


def test_the_gate_command_reads_the_audit_it_is_given(tmp_path: Path) -> None:
    """`judgelab gate` on a metrics.json (or its folder): no stage runs; exit 3 naming the
    refused judge and figure, 0 when every judge passes, 2 on a wrong judge at once."""
    from judgelab_cli import app

    audit = tmp_path / "my-audit"
    audit.mkdir()
    (audit / "metrics.json").write_text(json.dumps(_metrics()))
    runner = CliRunner()

    def gate_cli(*args: str):  # noqa: ANN202
        return runner.invoke(app, ["gate", "--metrics", str(audit), *args])

    refused = gate_cli("--fail-above-praise-within-group", "0.4", "--judge", "praising")
    assert refused.exit_code == EXIT_GATE, refused.output
    assert "gate: refused: praising: false_praise_within_group 0.600" in refused.output
    passed = gate_cli("--fail-below", "0.1", "--judge", "fit", "--judge", "straddling")
    assert passed.exit_code == 0 and "every gated judge passed" in passed.output
    assert "gate: undecided: straddling" in passed.output
    few = gate_cli("--fail-below", "0.1", "--judge", "few")
    assert few.exit_code == EXIT_GATE and "does not pass a figure it cannot place" in few.output
    bad = gate_cli("--fail-below", "0.1", "--judge", "nope")
    assert bad.exit_code == EXIT_BAD_INPUT and "judges to gate: ['blind'," in bad.output
    assert gate_cli("--fail-below", "5").exit_code == EXIT_BAD_INPUT
    none = gate_cli()
    assert none.exit_code == EXIT_BAD_INPUT and "no threshold given" in none.output
    missing = runner.invoke(app, ["gate", "-m", str(tmp_path / "nope"), "--fail-below", "0"])
    assert missing.exit_code == EXIT_BAD_INPUT and "no audit there to gate" in missing.output


def test_a_console_script_exits_2_on_bad_params(tmp_path: Path) -> None:
    bad = tmp_path / "params.yaml"
    bad.write_text("models: {}\nscores: {evaluators: []}\nrollouts: {nope: 1}\n")
    env = {**os.environ, "JUDGELAB_ROOT": str(tmp_path)}
    proc = subprocess.run([str(BIN / "judgelab"), "analysis", "-p", str(bad)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == EXIT_BAD_INPUT and "rollouts.nope" in proc.stderr
