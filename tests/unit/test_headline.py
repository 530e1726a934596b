"""README's findings table (judgelab.analysis.headline): every cell read from the metrics
files, every figure with its n, and a part that has not run says so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from judgelab.analysis.headline import COLUMNS, findings_table

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def rows(table: str) -> dict[str, list[str]]:
    lines = table.strip().splitlines()
    assert lines[0] == "| " + " | ".join(COLUMNS) + " |"
    cells = [line.strip("| ").split(" | ") for line in lines[2:]]
    return {row[1]: row for row in cells}


def audit_only(tmp_path: Path) -> Path:
    (tmp_path / "analysis").mkdir()
    shutil.copy(GOLDEN / "analysis_metrics.json", tmp_path / "analysis" / "metrics.json")
    return tmp_path


def test_audit_cells_with_their_n_and_no_ci_below_the_minimum(tmp_path: Path) -> None:
    table = rows(findings_table(audit_only(tmp_path)))
    assert list(table) == ["format", "rubric-b", "ruler-a", "syntax"]  # not the truth
    # no CI, so no pair is separated: one tier, in name order (accuracy cannot order it)
    assert {row[0] for row in table.values()} == {"1"}
    ruler = dict(zip(COLUMNS, table["ruler-a"], strict=True))
    # golden: pairwise 0.384615 over 4 mixed groups (< min_ci_groups 5): no CI
    assert ruler["pairwise acc., mixed groups"] == "0.385 (n = 4, too few for a CI)"
    assert ruler["top-1 acc."] == "0.250 (n = 4, too few for a CI)"
    assert ruler["false praise (≥ threshold)"] == "0.0% (n = 4, too few for a CI)"
    assert ruler["unscored"] == "0.0% (0 of 48)"  # 24 candidates x 2 repeats
    assert ruler["zero-advantage groups"] == "16.7% (2 of 12)"
    assert ruler["position consistency"] == "not run yet"
    assert ruler["held-out pass rate after training (Δ)"] == "not trained"


def test_a_valid_ci_is_shown_with_its_groups(tmp_path: Path) -> None:
    data = audit_only(tmp_path)
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    t = metrics["evaluators"]["ruler-a"]["truth"]
    t |= {
        "pairwise_accuracy_ci_low": 0.25,
        "pairwise_accuracy_ci_high": 0.5,
        "pairwise_accuracy_ci_reason": None,
        "pairwise_accuracy_n_groups": 7,
        "pairwise_accuracy_undefined_resamples": 0,
    }
    (data / "analysis" / "metrics.json").write_text(json.dumps(metrics))
    ruler = dict(zip(COLUMNS, rows(findings_table(data))["ruler-a"], strict=True))
    assert ruler["pairwise acc., mixed groups"] == "0.385 [0.250, 0.500], n = 7"


def test_probe_cells_once_the_probes_have_run(tmp_path: Path) -> None:
    data = audit_only(tmp_path)
    (data / "probes").mkdir()
    shutil.copy(GOLDEN / "probe_metrics.json", data / "probes" / "metrics.json")
    table = rows(findings_table(data))
    ruler = dict(zip(COLUMNS, table["ruler-a"], strict=True))
    probe = json.loads((GOLDEN / "probe_metrics.json").read_text())["judges"]["ruler-a"]
    consistency = probe["position"]["position_consistency"]
    assert ruler["position consistency"] == f"{consistency:.3f} (n = 4, too few for a CI)"
    assert table["format"][COLUMNS.index("position consistency")] == "not probed"


def test_probe_cells_show_the_noise_floor_where_the_probes_measured_one(tmp_path: Path) -> None:
    data = audit_only(tmp_path)
    (data / "probes").mkdir()
    metrics = json.loads((GOLDEN / "probe_metrics.json").read_text())
    probe = metrics["judges"]["ruler-a"]
    probe["position"]["position_consistency_noise_floor"] = 0.75
    probe["perturbation"]["claims"]["robustness_rate_noise_floor"] = 0.5
    (data / "probes" / "metrics.json").write_text(json.dumps(metrics))
    ruler = dict(zip(COLUMNS, rows(findings_table(data))["ruler-a"], strict=True))
    consistency = probe["position"]["position_consistency"]
    assert ruler["position consistency"] == (
        f"{consistency:.3f} (n = 4, too few for a CI); noise floor 0.750"
    )
    comments, claims = ruler["robust to comments / claims"].split(" / ")
    assert "noise floor" not in comments  # none measured for it
    assert claims.endswith("; noise floor 50.0%")


def test_training_cell(tmp_path: Path) -> None:
    data = audit_only(tmp_path)
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    metrics["train_judges"] = ["ruler-a", "rubric-b"]
    metrics["training"] = {
        "ruler-a": {
            "heldout": {
                "n_tasks": 8,
                "base": 0.5,
                "final": 0.625,
                "delta": 0.125,
                "delta_ci": [-0.125, 0.375],
                "ci_reason": None,
            }
        }
    }
    (data / "analysis" / "metrics.json").write_text(json.dumps(metrics))
    table = rows(findings_table(data))
    column = COLUMNS.index("held-out pass rate after training (Δ)")
    assert table["ruler-a"][column] == "0.500 → 0.625 (Δ +0.125 [-0.125, +0.375], n = 8 tasks)"
    assert table["rubric-b"][column] == "not run yet"  # configured, no output
    assert table["format"][column] == "not trained"


def test_rows_follow_the_ranking_tiers(tmp_path: Path) -> None:
    """A judge whose paired difference to every judge of the tier above has a CI excluding 0
    starts the next tier (judgelab.analysis.ranking); rows follow the tiers."""
    data = audit_only(tmp_path)
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    pairs: dict = {}
    for other in ("format", "rubric-b", "syntax"):
        x, y = sorted((other, "ruler-a"))
        pairs.setdefault(x, {})[y] = {"separated": True}
    metrics["power"] = {**metrics.get("power", {}), "pairs": pairs}
    (data / "analysis" / "metrics.json").write_text(json.dumps(metrics))
    table = rows(findings_table(data))
    assert [(row[0], name) for name, row in table.items()] == [
        ("1", "format"),
        ("1", "rubric-b"),
        ("1", "syntax"),
        ("2", "ruler-a"),
    ]


def test_training_cell_over_seeds_names_tasks_and_seeds(tmp_path: Path) -> None:
    """A judge trained over several seeds: the across-seeds figure, its n tasks × seeds."""
    from judgelab.analysis.training import training_metrics
    from judgelab.config import AnalysisSettings
    from tests.support.report_inputs import write_training_histories

    data = audit_only(tmp_path)
    write_training_histories(tmp_path / "training", ("ruler-a",), seeds=(1, 2))
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    metrics["train_judges"] = ["ruler-a"]
    metrics["training"] = training_metrics(tmp_path / "training", AnalysisSettings(bootstrap=0))
    (data / "analysis" / "metrics.json").write_text(json.dumps(metrics))
    cell = rows(findings_table(data))["ruler-a"][
        COLUMNS.index("held-out pass rate after training (Δ)")
    ]
    # report_inputs by hand: base 1, final (0.5 + 0) / 2 over HumanEval/2, /3
    assert cell == (
        "1.000 → 0.250 (Δ -0.750 (n = 2 groups: too few for a CI (minimum 5)), "
        "n = 2 tasks × 2 seeds; unable to decide: MDE 1.21 > 0.15)"
    )  # MDE: 2.80 * sqrt(2 * .25 * (1/1 + 1/2)) / 2
