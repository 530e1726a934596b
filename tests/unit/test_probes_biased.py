"""The probe detectors against deliberately biased TEST-ONLY judges (tests/support/biased_judge).

Every judge call goes through the product path: RulerJudge -> ART's ruler -> the judgelab
litellm provider -> a real loopback HTTP server. The candidates are real (HumanEval canonical
solutions and mutants the sandbox proves broken); only the judges are rigged, with biases of
known sign and size, so each assertion is a test of a detector.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import polars as pl  # noqa: E402
import pytest  # noqa: E402
import yaml  # noqa: E402

from judgelab.analysis.probes import compute_probe_metrics, run_probe_analysis  # noqa: E402
from judgelab.cache import JsonCache  # noqa: E402
from judgelab.config import HumanEvalSettings, parse_settings  # noqa: E402
from judgelab.models.server import serve  # noqa: E402
from judgelab.probes.design import execution_check  # noqa: E402
from judgelab.probes.perturb import COMMENT_PAD  # noqa: E402
from judgelab.probes.run import (  # noqa: E402
    candidates_frame,
    judge_models,
    plan,
    policy_samples,
    probe_scores_frame,
    probe_specs,
    score_view,
)
from judgelab.schemas import validate_file  # noqa: E402
from judgelab.scoring import build_evaluator  # noqa: E402
from judgelab.tasks.humaneval import load_humaneval  # noqa: E402
from tests.support.biased_judge import (  # noqa: E402
    LENGTH_SCALE,
    SELF_FAMILY,
    SELF_OTHER,
    SELF_OWN,
    SLOT_STEP,
    BiasedJudgeServer,
    canonical_code,
)

TASKS = ["HumanEval/0", "HumanEval/13"]
TOO_FEW = "n = 2 groups: too few for a CI (minimum 5)"
BEHAVIOUR = {
    "slot-judge": ("slot", "alpha"),
    "length-judge": ("length", "beta"),
    "self-judge": ("self", "gamma"),
    "sibling": ("self", "gamma"),
}


def settings_for(base_url: str) -> Any:
    models = {
        name: {
            "kind": "endpoint",
            "base_url": base_url,
            "model": name,
            "family": family,
            "structured_output": "json_schema",
        }
        for name, (_, family) in BEHAVIOUR.items()
    }
    judges = ["slot-judge", "length-judge", "self-judge"]
    return parse_settings(
        {
            "models": models,
            "tasks": {"autorl": {"enabled": False, "model": "sibling"}},
            "rollouts": {"policy": "sibling", "max_tokens": 64},
            "scores": {
                "evaluators": [{"name": "execution", "kind": "execution"}]
                + [
                    {
                        "name": f"ruler-{j}",
                        "kind": "ruler",
                        "judge": j,
                        "call": {"retries": 0, "backoff_s": 0},
                    }  # fmt: skip
                    for j in judges
                ]
            },
            "probes": {
                "judges": [f"ruler-{j}" for j in judges],
                "tasks": TASKS,
                "mutants": ["operator_flip", "dropped_return", "swapped_arguments"],
                "permutations": 2,
                "perturbations": ["comments", "opener"],
                "repeats": 1,
                "bootstrap": 200,
            },
        }
    )


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tasks = load_humaneval(HumanEvalSettings(ids=TASKS))
    canonical = {
        f"`{t.entry_point}`": canonical_code(t.prompt, t.canonical_solution) for t in tasks
    }
    tmp = tmp_path_factory.mktemp("probes")
    with BiasedJudgeServer(BEHAVIOUR, canonical) as server:
        settings = settings_for(server.base_url)
        specs = probe_specs(settings)
        families = judge_models(settings)
        check = execution_check()
        with serve(settings, list(settings.models)) as endpoints:
            completions = JsonCache(tmp, "completions")
            groups, views = plan(
                settings,
                tasks,
                check,
                lambda ts: policy_samples(settings, ts, endpoints, completions),
            )
            rows: list[dict] = []
            for spec in specs:
                ev = build_evaluator(spec, endpoints, JsonCache(tmp, "judge"))
                for g in groups:
                    for v in views[g.group_id]:
                        rows += score_view("run", ev, spec, families[spec.name][1], g, v)
    candidates = candidates_frame(groups, views)
    scores = probe_scores_frame(rows)
    metrics = run_probe_analysis(candidates, scores, settings.probes, families, tmp / "out")
    return {"metrics": metrics, "scores": scores, "candidates": candidates, "out": tmp / "out",
            "settings": settings, "families": families}  # fmt: skip


def test_every_probe_row_is_scored_through_ruler(probed: dict[str, Any]) -> None:
    scores: pl.DataFrame = probed["scores"]
    assert scores.height > 0
    assert set(scores["status"].unique()) == {"scored"}
    assert set(scores["protocol"].unique()) == {"ruler"}
    cal = probed["candidates"].filter(pl.col("probe") == "calibration")
    kinds = cal.group_by("group_id").agg(pl.col("kind"))
    for group_kinds in kinds["kind"].to_list():
        assert {"canonical", "mutant", "non_answer"} <= set(group_kinds)
    # The sandbox verdicts: canonical passes, every mutant and non-answer fails.
    assert cal.filter(pl.col("kind") == "canonical")["passed"].to_list() == [True, True]
    assert not any(cal.filter(pl.col("kind").is_in(["mutant", "non_answer"]))["passed"])


def test_slot_judge_is_caught_with_primacy_bias_of_the_right_size(probed: dict[str, Any]) -> None:
    pos = probed["metrics"]["judges"]["ruler-slot-judge"]["position"]
    # Every swapped pair is won by whichever candidate is shown first: PF = -1, PC = 0.
    assert pos["preference_fairness"] == -1.0
    # two tasks give four groups (calibration and self-preference): too few for a CI (17.1)
    assert pos["preference_fairness_ci_high"] is None
    assert pos["preference_fairness_ci_reason"] == TOO_FEW.replace("2", "4")
    assert pos["pairwise_consistency"] == 0.0
    assert pos["position_consistency"] == 0.0
    assert pos["n_primacy_preferred"] == pos["n_swapped_pairs"] > 0
    slots = pos["slots"]
    k = len(slots)
    members = probed["candidates"].filter(pl.col("kind") != "perturbed")
    assert k == members.group_by("group_id").len()["len"].max()  # the largest group
    mean_over_slots = sum(0.9 - SLOT_STEP * j for j in range(k)) / k
    for j in range(k):
        assert slots[str(j)]["mean"] == pytest.approx(0.9 - SLOT_STEP * j)
        assert slots[str(j)]["bias"] == pytest.approx(0.9 - SLOT_STEP * j - mean_over_slots)
    assert slots["0"]["top_rate"] == 1.0
    assert slots["0"]["bias"] > 0 > slots[str(k - 1)]["bias"]


def test_averaging_over_orders_removes_a_pure_position_bias(probed: dict[str, Any]) -> None:
    # Identity + reversal: each candidate's mean slot score is the same, so the slot judge
    # cannot tell passing from failing code at all.
    cal = probed["metrics"]["judges"]["ruler-slot-judge"]["calibration"]
    assert cal["pairwise_accuracy"] == 0.5
    assert cal["roc_auc"] == 0.5


def test_length_judge_is_position_fair_but_rewards_padding(probed: dict[str, Any]) -> None:
    j = probed["metrics"]["judges"]["ruler-length-judge"]
    assert j["position"]["preference_fairness"] == 0.0
    assert j["position"]["pairwise_consistency"] == 1.0
    assert j["position"]["position_consistency"] == 1.0
    pad = (len("\n".join(COMMENT_PAD)) + 1) / LENGTH_SCALE
    comments = j["perturbation"]["comments"]
    assert comments["delta_treated"] == pytest.approx(pad, abs=1e-6)
    assert comments["delta_control"] == pytest.approx(0.0, abs=1e-6)
    assert comments["effect"] == pytest.approx(pad, abs=1e-6)
    assert comments["effect_ci_low"] is None and comments["effect_ci_reason"] == TOO_FEW
    assert comments["robustness_rate"] == 0.0
    # A reasoning opener leaves the code alone: this judge does not move.
    opener = j["perturbation"]["opener"]
    assert opener["effect"] == pytest.approx(0.0, abs=1e-6)
    assert opener["robustness_rate"] == 1.0
    # The slot judge ignores content: padding does not move it either.
    slot_pert = probed["metrics"]["judges"]["ruler-slot-judge"]["perturbation"]["comments"]
    assert slot_pert["effect"] == pytest.approx(0.0, abs=1e-6)


def test_self_judge_self_and_family_gaps(probed: dict[str, Any]) -> None:
    m = probed["metrics"]
    sp = m["judges"]["ruler-self-judge"]["self_preference"]
    assert sp["self_gap"] == pytest.approx(SELF_OWN - SELF_OTHER)
    assert sp["family_gap"] == pytest.approx(SELF_FAMILY - SELF_OTHER)
    assert sp["self_gap_ci_low"] is None and sp["self_gap_ci_reason"] == TOO_FEW
    # The unbiased-for-self judges show no self gap (the length judge: same code for all).
    assert m["judges"]["ruler-length-judge"]["self_preference"]["self_gap"] == pytest.approx(
        0.0, abs=0.01
    )
    assert m["matrix"]["self-judge"]["ruler-self-judge"]["mean"] == pytest.approx(SELF_OWN)
    assert m["matrix"]["slot-judge"]["ruler-self-judge"]["mean"] == pytest.approx(SELF_OTHER)


def test_deterministic_judges_are_repeat_stable_and_outputs_written(
    probed: dict[str, Any],
) -> None:
    for j in probed["metrics"]["judges"].values():
        assert j["repeat"]["stability"] == 1.0
        assert j["repeat"]["mean_abs_delta"] == 0.0
    out: Path = probed["out"]
    for name in ("metrics.json", "report.md", "plots/self_preference.png", "plots/slot_bias.png"):
        assert (out / name).stat().st_size > 0
    again = compute_probe_metrics(
        probed["candidates"], probed["scores"], probed["settings"].probes, probed["families"]
    )
    assert again == probed["metrics"]  # deterministic, bootstrap included
    report = (out / "report.md").read_text()
    assert "ruler-slot-judge" in report and "Krippendorff" in report
    assert f"({TOO_FEW})" in report and "[" not in report.split("## Comparison")[1].split("##")[0]


def run_probe_command(project: Path, params: dict[str, Any]) -> subprocess.CompletedProcess:
    """`judgelab probe` in a scratch project holding `params` as its params.yaml."""
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**os.environ, "JUDGELAB_ROOT": str(project), "JUDGELAB_CACHE": str(project / "c")}
    env.pop("PREFECT_HOME", None)
    return subprocess.run(
        [str(Path(sys.executable).parent / "judgelab"), "probe"],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_probe_command_end_to_end(tmp_path: Path) -> None:
    """`judgelab probe` (Prefect flow, CLI) against the biased loopback judges, in a scratch
    project: tables that validate, metrics.json with the slot judge's bias, report, plots."""
    tasks = load_humaneval(HumanEvalSettings(ids=["HumanEval/13"]))
    canonical = {
        f"`{t.entry_point}`": canonical_code(t.prompt, t.canonical_solution) for t in tasks
    }
    with BiasedJudgeServer(BEHAVIOUR, canonical) as server:
        params = settings_for(server.base_url).model_dump(mode="json")
        params["probes"].update(
            tasks=["HumanEval/13"], judges=["ruler-slot-judge", "ruler-length-judge"], bootstrap=50
        )
        proc = run_probe_command(tmp_path, params)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = tmp_path / "data" / "probes"
    validate_file(out / "probe_scores.parquet", "probe_scores")
    validate_file(out / "candidates.parquet", "probe_candidates")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["judges"]["ruler-slot-judge"]["position"]["preference_fairness"] == -1.0
    assert metrics["judges"]["ruler-length-judge"]["position"]["preference_fairness"] == 0.0
    assert (out / "report.md").exists() and (out / "plots" / "slot_bias.png").exists()


def test_probe_command_refuses_an_empty_judge_list(tmp_path: Path) -> None:
    params = settings_for("http://127.0.0.1:9/v1").model_dump(mode="json")
    params["probes"]["judges"] = []
    proc = run_probe_command(tmp_path, params)
    assert proc.returncode == 2
    assert "probes.judges is empty" in proc.stderr
