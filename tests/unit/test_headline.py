"""README's findings table (judgelab.report.headline): every cell read from the metrics
files, every figure with its n, and a part that has not run says so."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from judgelab.report.headline import (
    COLUMNS,
    COMPACT_COLUMNS,
    audit_document,
    findings_block,
    findings_table,
    splice,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def rows(table: str) -> dict[str, list[str]]:
    lines = [line for line in table.strip().splitlines() if line.startswith("|")]
    columns = lines[0].strip("| ").split(" | ")
    assert columns == list(COLUMNS) or (columns[0], *columns[2:]) == (
        COMPACT_COLUMNS[0], *COMPACT_COLUMNS[2:])  # fmt: skip
    cells = [line.strip("| ").split(" | ") for line in lines[2:] if line.startswith("|")]
    return {row[columns.index("judge")]: row for row in cells}


def audit_only(tmp_path: Path, primary: str = "pairwise_accuracy_strict") -> Path:
    """The golden audit's metrics, ranked by `primary` (these tests were written for the strict
    pairwise accuracy's cells; the golden's own, signal fidelity, has a test of its own)."""
    (tmp_path / "analysis").mkdir()
    metrics = json.loads((GOLDEN / "analysis_metrics.json").read_text())
    metrics["settings"]["primary"] = metrics["power"]["endpoint"] = primary
    metrics.pop("decision", None)  # decided again on that primary
    (tmp_path / "analysis" / "metrics.json").write_text(json.dumps(metrics))
    return tmp_path


def test_the_default_primary_orders_the_rows() -> None:
    metrics = json.loads((GOLDEN / "analysis_metrics.json").read_text())
    assert metrics["power"]["endpoint"] == "signal_fidelity"
    evs = metrics["evaluators"]
    value = {
        n: ev["truth"]["signal_fidelity"] for n, ev in evs.items() if ev["protocol"] != "execution"
    }
    with tempfile.TemporaryDirectory() as tmp:
        table = rows(findings_table(audit_only(Path(tmp), "signal_fidelity")))
    assert list(table) == sorted(value, key=lambda n: (-value[n], n))


def test_audit_cells_with_their_n_and_no_ci_below_the_minimum(tmp_path: Path) -> None:
    table = rows(findings_table(audit_only(tmp_path)))
    # rank order (strict pairwise accuracy), ties by name; not the truth
    assert list(table) == ["rubric-b", "format", "syntax", "ruler-a"]
    # no CI, so no pair is compared: every judge could hold every place
    assert {row[0] for row in table.values()} == {"1–4"}
    ruler = dict(zip(COLUMNS, table["ruler-a"], strict=True))
    # golden: strict pairwise 5/13 over 4 mixed groups (< min_ci_groups 5): no CI
    assert ruler["strict pairwise acc."] == "0.385 (n = 4)†"
    assert ruler["pairwise acc. (ties ½)"] == "0.385 (n = 4)†"
    assert ruler["false praise ≥ threshold (absolute scale)"] == "0.0% (n = 4)†"
    assert ruler["false praise within group"] == "54.5% (n = 4)†"
    assert ruler["unscored"] == "0.0% (0 of 48)"  # 24 candidates x 2 repeats
    assert ruler["zero-advantage mixed groups"] == "0.0% (0 of 4)"
    assert "† Fewer task groups than the minimum (5) for a CI" not in findings_table(
        tmp_path
    )  # the table alone; README's block and the document carry the footnote once
    block = findings_block(tmp_path)
    assert block.count("† Fewer task groups than the minimum (5) for a CI") == 1
    assert ruler["position consistency"] == "not run yet"
    assert ruler["held-out pass rate after training (Δ)"] == "not trained"


def test_a_valid_ci_is_shown_with_its_groups(tmp_path: Path) -> None:
    data = audit_only(tmp_path)
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    t = metrics["evaluators"]["ruler-a"]["truth"]
    t |= {
        "pairwise_accuracy_strict_ci_low": 0.25,
        "pairwise_accuracy_strict_ci_high": 0.5,
        "pairwise_accuracy_strict_ci_reason": None,
        "pairwise_accuracy_strict_n_groups": 7,
        "pairwise_accuracy_strict_undefined_resamples": 0,
    }
    (data / "analysis" / "metrics.json").write_text(json.dumps(metrics))
    ruler = dict(zip(COLUMNS, rows(findings_table(data))["ruler-a"], strict=True))
    assert ruler["strict pairwise acc."] == "0.385 [0.250, 0.500], n = 7"
    compact = rows(findings_block(data).split("\n\n")[1])["ruler-a"]
    assert compact[1] == "0.385 [0.250, 0.500], n = 7; 0.0% tied"


def test_probe_cells_once_the_probes_have_run(tmp_path: Path) -> None:
    data = audit_only(tmp_path)
    (data / "probes").mkdir()
    shutil.copy(GOLDEN / "probe_metrics.json", data / "probes" / "metrics.json")
    table = rows(findings_table(data))
    ruler = dict(zip(COLUMNS, table["ruler-a"], strict=True))
    probe = json.loads((GOLDEN / "probe_metrics.json").read_text())["judges"]["ruler-a"]
    consistency = probe["position"]["position_consistency"]
    floor = probe["position"]["position_consistency_noise_floor"]  # 3 calls a group: a floor
    assert ruler["position consistency"] == f"{consistency:.3f} (n = 2)†; noise floor {floor:.3f}"
    assert table["format"][COLUMNS.index("position consistency")] == "not probed"


def test_probe_cells_show_the_noise_floor_where_the_probes_measured_one(tmp_path: Path) -> None:
    data = audit_only(tmp_path)
    (data / "probes").mkdir()
    metrics = json.loads((GOLDEN / "probe_metrics.json").read_text())
    probe = metrics["judges"]["ruler-a"]
    probe["position"]["position_consistency_noise_floor"] = 0.75
    probe["perturbation"]["claims"]["robustness_rate_noise_floor"] = 0.5
    probe["perturbation"]["comments"]["robustness_rate_noise_floor"] = None
    (data / "probes" / "metrics.json").write_text(json.dumps(metrics))
    ruler = dict(zip(COLUMNS, rows(findings_table(data))["ruler-a"], strict=True))
    consistency = probe["position"]["position_consistency"]
    assert ruler["position consistency"] == (f"{consistency:.3f} (n = 2)†; noise floor 0.750")
    comments, claims = ruler["robust to comments / claims"].split(" / ")
    assert "noise floor" not in comments  # none measured for it
    assert claims.endswith("; noise floor 50.0%")


def test_training_cell(tmp_path: Path) -> None:
    data = audit_only(tmp_path)
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    metrics["train_rewards"] = ["ruler-a", "rubric-b"]
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


def test_rows_follow_the_rank_intervals(tmp_path: Path) -> None:
    """A judge separated below every other (Holm) ranks last, the others share 1–3; the
    README block and the audit document say the same in their prose."""
    data = audit_only(tmp_path)
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    pairs: dict = {}
    for other in ("format", "rubric-b", "syntax"):
        x, y = sorted((other, "ruler-a"))
        diff = -0.1 if x == "ruler-a" else 0.1  # the other judge is the higher one
        pairs.setdefault(x, {})[y] = {"separated": True, "difference": diff, "n_groups": 9,
                                      "p_value": 0.001, "p_holm": 0.01}  # fmt: skip
    metrics["power"] = {**metrics.get("power", {}), "pairs": pairs, "n_comparisons": 3}
    (data / "analysis" / "metrics.json").write_text(json.dumps(metrics))
    table = rows(findings_table(data))
    assert [(row[0], name) for name, row in table.items()] == [
        ("1–3", "rubric-b"),
        ("1–3", "format"),
        ("1–3", "syntax"),
        ("4", "ruler-a"),
    ]
    block = findings_block(data)
    for other in ("format", "rubric-b", "syntax"):
        assert f"{other} above ruler-a (" in block
    doc = audit_document(data)
    assert "format above ruler-a (" in doc and "| ruler-a | 4 |" in doc


def test_splice_replaces_only_the_block() -> None:
    readme = (
        "intro\n<!-- reference-findings:begin -->\nold\n<!-- reference-findings:end -->\nrest\n"
    )
    out = splice(readme, "new\n")
    assert (
        out
        == "intro\n<!-- reference-findings:begin -->\nnew\n<!-- reference-findings:end -->\nrest\n"
    )


def test_training_cell_over_seeds_names_tasks_and_seeds(tmp_path: Path) -> None:
    """A judge trained over several seeds: the across-seeds figure, its n tasks × seeds."""
    from judgelab.analysis.training import training_metrics
    from judgelab.config import AnalysisSettings
    from tests.support.report_inputs import write_training_histories

    data = audit_only(tmp_path)
    write_training_histories(tmp_path / "training", ("ruler-a",), seeds=(1, 2))
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    metrics["train_rewards"] = ["ruler-a"]
    metrics["training"] = training_metrics(tmp_path / "training", AnalysisSettings(bootstrap=0))
    (data / "analysis" / "metrics.json").write_text(json.dumps(metrics))
    cell = rows(findings_table(data))["ruler-a"][
        COLUMNS.index("held-out pass rate after training (Δ)")
    ]
    # report_inputs by hand: base 1, final (0.5 + 0) / 2 over HumanEval/2, /3
    assert cell == (
        "1.000 → 0.250 (Δ -0.750 (n = 2 groups: too few for a CI (minimum 15)), "
        "n = 2 tasks × 2 seeds; unable to decide: MDE 0.99 > 0.15)"
    )  # MDE: 2.80 * sqrt(2 * .25 * (1/2 + 1/2)) / 2: each seed its own base and final draw


def test_the_block_names_the_verdict_of_each_pair_it_cannot_separate(tmp_path: Path) -> None:
    """Hand-made pairs: one separated, three not (one equivalent within the margin, one with
    the tasks that would decide it at the margin, one without an estimate) and one never
    tested; the bullet names the equivalent pair and lists the undecided ones, fewest tasks
    first and the unestimated last, each with its n, in the compared tasks' own units."""
    data = audit_only(tmp_path)
    metrics = json.loads((data / "analysis" / "metrics.json").read_text())
    pairs = {
        "format": {
            "ruler-a": {"separated": True, "difference": 0.2, "n_groups": 20, "p_value": 0.001,
                        "p_holm": 0.003},
            "syntax": {"separated": False, "difference": 0.01, "n_groups": 20, "p_value": 0.6,
                       "p_holm": 1.0, "equivalent": True, "p_equivalence_holm": 0.01},
        },
        "rubric-b": {
            "ruler-a": {"separated": False, "difference": 0.05, "n_groups": 18, "p_value": 0.2,
                        "p_holm": 0.4, "tasks_to_decide": 120},
            "syntax": {"separated": False, "difference": 0.0, "n_groups": 18, "p_value": 0.9,
                       "p_holm": 1.0, "tasks_to_decide": None},
        },
        "ruler-a": {"syntax": {"separated": False, "n_groups": 3, "p_value": None}},
    }  # fmt: skip
    units = "tasks the tests split or where either judge's scores differ"
    metrics["power"] = {"pairs": pairs, "n_comparisons": 4, "margin": 0.05, "power": 0.8,
                        "units": units}  # fmt: skip
    (data / "analysis" / "metrics.json").write_text(json.dumps(metrics))
    bullet = next(b for b in findings_block(data).splitlines() if "**Not separated.**" in b)
    assert bullet == (
        "- **Not separated.** 3 of the 4 compared pairs do not differ after Holm's correction;"
        " 1 of them is shown equivalent within the margin 0.05 (TOST, Holm) (format and"
        " syntax); the shared tasks (tasks the tests split or where either judge's scores"
        " differ) each undecided pair would need to be decided at the margin (power 0.8):"
        " rubric-b and ruler-a (n = 18): about 120; rubric-b and syntax (n = 18): not"
        " estimated."
    )
    assert "mixed tasks each would need" not in findings_block(data)


def _figure(name: str, value: float, n: int, ci: tuple[float, float] | None) -> dict:
    """A figure as `analysis.stats.figure_with_ci` writes it (the golden minimum: 5 groups)."""
    return {
        name: value,
        f"{name}_ci_low": ci[0] if ci else None,
        f"{name}_ci_high": ci[1] if ci else None,
        f"{name}_ci_reason": None if ci else f"n = {n} groups: too few for a CI (minimum 5)",
        f"{name}_n_groups": n,
        f"{name}_undefined_resamples": 0 if ci else None,
    }


def _attack(success: float, baseline: float, shift: float, ci: tuple[float, float] | None,
            n: int, p: tuple[float, float] | None = None) -> dict:  # fmt: skip
    """`p`: (raw, Holm-adjusted) p of the uplift; None: untested (too few tasks)."""
    up = success - baseline
    return {
        "n_tasks": n, "n_attacked": 3 * n, "n_unscored": 0, "passes": False,
        **_figure("success_rate", success, n, (success - 0.1, success + 0.1) if ci else None),
        **_figure("baseline_rate", baseline, n, (0.0, baseline + 0.1) if ci else None),
        **_figure("uplift", up, n, (up - 0.2, up + 0.2) if ci else None),
        **_figure("praise_rate", success, n, None),
        **_figure("baseline_praise_rate", baseline, n, None),
        **_figure("mean_attacked", 0.5, n, None), **_figure("mean_original", 0.4, n, None),
        **_figure("shift", shift, n, ci),
        "p_value": p[0] if p else None, "p_holm": p[1] if p else None,
        "effective": bool(p and p[1] < 0.05 and up > 0),
    }  # fmt: skip


def test_the_attack_finding_calls_a_shift_real_only_where_its_ci_excludes_0(
    tmp_path: Path,
) -> None:
    """Hand-made attack figures: ruler-a's master key raises its scores by a valid CI, its
    grader comment's CI spans 0, rubric-b's figures come from too few groups for a CI. The
    README bullet gives each success rate with its n beside the baseline, calls effective
    only the attack whose Holm-adjusted p is below 0.05 and only the first shift real; the
    audit document gets the attack table with every figure's n and the Holm verdict."""
    data = audit_only(tmp_path)
    (data / "probes").mkdir()
    metrics = json.loads((GOLDEN / "probe_metrics.json").read_text())
    metrics["settings"]["tasks"] = [f"HumanEval/{i}" for i in range(20)]
    metrics["judges"]["ruler-a"]["attacks"] = {
        "master_key_colon": _attack(0.4, 0.1, 0.2, (0.05, 0.35), 20, (0.004, 0.008)),
        "grader_comment": _attack(0.15, 0.1, 0.02, (-0.1, 0.14), 20, (0.03, 0.06)),
    }
    metrics["attack_tests"] = {"correction": "holm", "n_tests": 2, "alpha": 0.05}
    metrics["judges"]["rubric-b"]["attacks"] = {
        "master_key_colon": _attack(0.0, 0.0, 0.3, None, 4),
    }
    (data / "probes" / "metrics.json").write_text(json.dumps(metrics))
    bullet = next(b for b in findings_block(data).splitlines() if "**Attacks" in b)
    assert bullet == (
        "- **Attacks (probes on 20 tasks).** Success: the attacked known-failing candidate "
        "scored above its call's mean (a positive GRPO advantage); baseline: the same for the "
        "unattacked original. master_key_colon: rubric-b 0.0% (n = 4)† "
        "(baseline 0.0% (n = 4)†); ruler-a 40.0% [30.0%, 50.0%], n = 20 (baseline 10.0% "
        "[0.0%, 20.0%], n = 20). grader_comment: ruler-a 15.0% [5.0%, 25.0%], n = 20 "
        "(baseline 10.0% [0.0%, 20.0%], n = 20). Effective at p < 0.05, Holm-adjusted over 2 "
        "judge × attack tests: master_key_colon on ruler-a (uplift 30.0% [10.0%, 50.0%], "
        "n = 20, Holm-adjusted p = 0.008). Against the "
        "unattacked members of the same calls, master_key_colon raised ruler-a's scores of "
        "the attacked candidates by +0.200 [+0.050, +0.350], n = 20; no other attack moved a "
        "judge's scores by a valid CI."
    )
    doc = audit_document(data)
    attacks = doc.split("## Attacks", 1)[1]
    assert "Holm-adjusted over 2 judge × attack tests" in attacks
    assert (
        "| ruler-a | master_key_colon | 20 | 60 (0) | 0.400 [0.300, 0.500], n = 20 | "
        "0.100 [0.000, 0.200], n = 20 | 0.300 [0.100, 0.500], n = 20 | effective (p = 0.004, "
        "Holm = 0.008) | 0.400 (n = 20)† / 0.100 (n = 20)† | 0.500 (n = 20)† / 0.400 (n = 20)† "
        "| 0.200 [0.050, 0.350], n = 20 | — |"
    ) in attacks
    # raw p 0.03 < 0.05, but not after Holm: not called effective
    assert "| not shown (p = 0.030, Holm = 0.060) |" in attacks
    assert (
        "| rubric-b | master_key_colon | 4 | 12 (0) | 0.000 (n = 4)† | 0.000 (n = 4)† | "
        "0.000 (n = 4)† | not tested (n = 4 groups: too few for a CI (minimum 5)) | "
        "0.000 (n = 4)† / 0.000 (n = 4)† | 0.500 (n = 4)† / 0.400 (n = 4)† | 0.300 (n = 4)† | — |"
    ) in attacks
    assert attacks.count("† Fewer task groups than the minimum (5) for a CI") == 1
    ruler = dict(zip(COLUMNS, rows(findings_table(data))["ruler-a"], strict=True))
    assert ruler["robust to comments / claims"].count(" / ") == 1  # golden: both perturbations


def test_without_attacks_the_block_has_no_attack_finding(tmp_path: Path) -> None:
    data = audit_only(tmp_path)
    (data / "probes").mkdir()
    metrics = json.loads((GOLDEN / "probe_metrics.json").read_text())
    metrics["judges"]["ruler-a"]["perturbation"] = {}
    (data / "probes" / "metrics.json").write_text(json.dumps(metrics))
    assert "**Attacks" not in findings_block(data) and "## Attacks" not in audit_document(data)
    ruler = dict(zip(COLUMNS, rows(findings_table(data))["ruler-a"], strict=True))
    assert ruler["robust to comments / claims"] == "not run"


def test_the_study_finding_once_the_study_has_run(tmp_path: Path) -> None:
    """The training bullet and section: the effect measure's check first, then the primary's
    prediction, each sentence the study's own from the figures in its files."""
    from judgelab.analysis.prediction import effect_check, predict
    from judgelab.report.prediction import check_sentence, sentence

    data = audit_only(tmp_path)
    assert "predict training" not in findings_block(data)
    effects = [{"arm": a, "seed": s, "effect": e} for a, base in
               (("flip-0", 3.0), ("flip-0.5", 0.1), ("flip-1", -3.0), ("placebo", 0.0),
                ("judge", 1.0), ("other", -1.0))
               for s, e in enumerate((base - 0.1, base, base + 0.1))]  # fmt: skip
    audit = {"flip-0": 1.0, "flip-0.5": 0.0, "flip-1": -1.0, "placebo": 0.05, "judge": 0.3,
             "other": -0.2}  # fmt: skip
    pred = predict("signal_fidelity", audit, effects, 6, 200, 0)
    check = effect_check(effects, {"flip-0": 0.0, "flip-0.5": 0.5, "flip-1": 1.0}, "placebo")
    (data / "study").mkdir()
    (data / "study" / "prediction.json").write_text(
        json.dumps({"predictions": [pred], "effect_check": check, "audit": {}})
    )
    (data / "study" / "effects.json").write_text(json.dumps(
        {"settings": {"steps": 1}, "bank": {"bank_samples": 32, "bank_tasks": 8,
         "bank_contrast_tasks": 8}, "seconds": {"total": 60.0}, "effects": effects}
    ))  # fmt: skip
    block = findings_block(data)
    bullet = next(line for line in block.splitlines() if "predict training?" in line)
    assert check_sentence(check) in bullet and sentence(pred) in bullet
    assert bullet.index("passes its check") < bullet.index("predicts the training effect")
    assert "1 GRPO step(s)" in bullet
    doc = audit_document(data)
    assert "## Does the audit predict training?" in doc and "| flip-0 | 1.000 |" in doc


def test_what_was_judged_follows_how_the_populations_were_grouped() -> None:
    from judgelab.report.headline import design_sentence

    analysis = {"n_tasks": 5, "n_candidates": 36,
                "population": {"headline": "natural", "judged": "apart", "n_candidates": 20,
                               "n_tasks": 5}}  # fmt: skip
    said = design_sentence(analysis) or ""
    assert "5 tasks and 36 candidates: the policy's own 20 of 5 tasks" in said
    assert "judged alone in one call" in said and "`scores.populations: apart`" in said
    analysis["population"]["judged"] = "together"
    assert "beside its contrast group (`scores.populations: together`)" in (
        design_sentence(analysis) or "")  # fmt: skip
    assert design_sentence({"population": {"headline": "all"}}) is None
