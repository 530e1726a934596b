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

from judgelab.analysis.probes import compute_probe_metrics, probe_ci_rule  # noqa: E402
from judgelab.cache import JsonCache  # noqa: E402
from judgelab.config import AnalysisSettings, HumanEvalSettings, parse_settings  # noqa: E402
from judgelab.evaluators.registry import build_evaluator  # noqa: E402
from judgelab.models.server import serve  # noqa: E402
from judgelab.probes.design import ProbeGroup, View  # noqa: E402
from judgelab.probes.run import (  # noqa: E402
    ProbeJudge,
    candidates_frame,
    judge_models,
    plan,
    policy_samples,
    probe_scores_frame,
    probe_specs,
    score_view,
)
from judgelab.report.probes import run_probe_analysis  # noqa: E402
from judgelab.rollouts.contrast import execution_check  # noqa: E402
from judgelab.rollouts.perturb import COMMENT_PAD  # noqa: E402
from judgelab.schemas import validate_file  # noqa: E402
from judgelab.tasks.humaneval import load_humaneval  # noqa: E402
from tests.support.biased_judge import (  # noqa: E402
    LENGTH_SCALE,
    SELF_FAMILY,
    SELF_OTHER,
    SELF_OWN,
    SLOT_STEP,
    BiasedJudgeServer,
    canonical_code,
    ruler_evaluators,
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
            "scores": {"evaluators": ruler_evaluators(judges)},
            "probes": {
                "judges": [f"ruler-{j}" for j in judges],
                "tasks": TASKS,
                "mutants": ["operator_flip", "dropped_return", "swapped_arguments"],
                "permutations": 2,
                "perturbations": ["comments", "opener"],
                "repeats": 2,
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
                judge = ProbeJudge(
                    spec,
                    settings.probes,
                    lambda s: build_evaluator(s, endpoints, JsonCache(tmp, "judge")),
                )
                for g in groups:
                    for v in views[g.group_id]:
                        rows += score_view("run", judge.for_view(v), families[spec.name][1], g, v)
    candidates = candidates_frame(groups, views)
    scores = probe_scores_frame(rows)
    # The rigged judges are deterministic: their CIs are checked on 2 tasks' groups here; the
    # default minimum (5) is test_the_default_minimum_leaves_two_tasks_without_cis's.
    rule = probe_ci_rule(AnalysisSettings(min_ci_groups=2), settings.probes)
    metrics = run_probe_analysis(
        candidates, scores, settings.probes, families, tmp / "out", rule=rule
    )
    return {"metrics": metrics, "scores": scores, "candidates": candidates, "out": tmp / "out",
            "settings": settings, "families": families,
            "requests": list(server.requests)}  # fmt: skip


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
    assert pos["preference_fairness_ci_high"] == -1.0
    assert pos["position_consistency"] == 0.0
    assert pos["top_choice_agreement"] == 0.0
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
    # Same candidate first vs last: SLOT_STEP * (k_g - 1) in a group of k_g, two candidates
    # (one first in each order) per group.
    sizes = members.group_by("group_id").len()["len"].to_list()
    expected = sum(2 * SLOT_STEP * (kg - 1) for kg in sizes) / (2 * len(sizes))
    assert pos["slot_effect"] == pytest.approx(expected)
    assert pos["slot_effect_ci_low"] > 0


def test_averaging_over_orders_removes_a_pure_position_bias(probed: dict[str, Any]) -> None:
    # Identity + reversal: each candidate's mean slot score is the same, so the slot judge
    # cannot tell passing from failing code at all.
    cal = probed["metrics"]["judges"]["ruler-slot-judge"]["calibration"]
    assert cal["pairwise_accuracy"] == 0.5
    assert cal["roc_auc"] == 0.5


def test_length_judge_is_position_fair_but_rewards_padding(probed: dict[str, Any]) -> None:
    j = probed["metrics"]["judges"]["ruler-length-judge"]
    assert j["position"]["preference_fairness"] == 0.0
    assert j["position"]["position_consistency"] == 1.0
    assert j["position"]["slot_effect"] == pytest.approx(0.0, abs=1e-6)
    pad = (len("\n".join(COMMENT_PAD)) + 1) / LENGTH_SCALE
    comments = j["perturbation"]["comments"]
    assert comments["delta_treated"] == pytest.approx(pad, abs=1e-6)
    assert comments["delta_control"] == pytest.approx(0.0, abs=1e-6)
    assert comments["effect"] == pytest.approx(pad, abs=1e-6)
    assert comments["effect_ci_low"] == pytest.approx(pad, abs=1e-6)  # deterministic judge
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
    # n counts the tasks with a matched cell; a deterministic judge gives every task the same
    # gap, which the truth figures' interval (studentized bootstrap) declines to turn into a CI
    assert sp["n_tasks"] == sp["self_gap_n_groups"] == 2
    assert sp["self_gap_ci_low"] is None
    assert sp["self_gap_ci_reason"] == "all 2 groups give the same value: no spread for a CI"
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
        assert j["noise_floor"]["mean_abs_delta"] == 0.0
        assert j["noise_floor"]["position_consistency_with_flat"] == 1.0
        # pairs tied in both calls are flat, not consistent: a judge that ties every pair
        # has no consistency figure at all
        assert j["noise_floor"]["position_consistency"] in (1.0, None)
    slot = probed["metrics"]["judges"]["ruler-slot-judge"]["noise_floor"]
    assert slot["stability"] == 1.0 and slot["top_choice_agreement"] == 1.0
    out: Path = probed["out"]
    for name in ("metrics.json", "report.md", "plots/self_preference.png", "plots/slot_bias.png"):
        assert (out / name).stat().st_size > 0
    again = compute_probe_metrics(
        probed["candidates"], probed["scores"], probed["settings"].probes, probed["families"],
        rule=probe_ci_rule(AnalysisSettings(min_ci_groups=2), probed["settings"].probes),
    )  # fmt: skip
    assert again == probed["metrics"]  # deterministic, bootstrap included
    report = (out / "report.md").read_text()
    assert "ruler-slot-judge" in report and "Krippendorff" in report


def test_order_views_at_temperature_0_and_repeats_at_repeat_temperature(
    probed: dict[str, Any],
) -> None:
    probes = probed["settings"].probes
    # the defaults: the repeats at the order views' temperature (the floor's noise is theirs)
    assert (probes.temperature, probes.repeat_temperature) == (0.0, 0.0)
    judged = [r for r in probed["requests"] if "<trajectory" in json.dumps(r["messages"])]
    # The request seed is call.seed + 1000 * repeat + attempt: repeats are seeds >= 1000.
    repeats = [r for r in judged if r["seed"] >= 1000]
    views = [r for r in judged if r["seed"] < 1000]
    assert repeats and views
    assert {r["temperature"] for r in views} == {0.0}
    assert {r["temperature"] for r in repeats} == {0.0}
    # Two repeats per group (known-truth and self-preference) and judge, at the repeat
    # temperature: the floor covers every group the position figures rest on.
    n_groups = probed["candidates"]["group_id"].n_unique()
    assert len(repeats) == 3 * n_groups * probes.repeats
    floor = probed["metrics"]["judges"]["ruler-slot-judge"]["noise_floor"]
    assert floor["repeats"] == [0, 1, 2] and floor["temperature"] == 0.0
    assert floor["calls_per_group"] == 3 and "unusable" not in floor


def test_probe_temperature_keys_the_judge_cache(tmp_path: Path) -> None:
    """The same view at another temperature is a new judge call, never a cached reply."""
    tasks = load_humaneval(HumanEvalSettings(ids=["HumanEval/13"]))
    canonical = {
        f"`{t.entry_point}`": canonical_code(t.prompt, t.canonical_solution) for t in tasks
    }
    with BiasedJudgeServer(BEHAVIOUR, canonical) as server:
        settings = settings_for(server.base_url)
        verdicts = iter([True])  # the canonical solution passes, every mutant fails

        def check(task: Any, code: str) -> bool:
            return next(verdicts, False)

        groups, _views = plan(settings, tasks, check, None)
        group: ProbeGroup = groups[0]
        spec = settings.evaluator("ruler-length-judge")
        cache = JsonCache(tmp_path, "judge")
        with serve(settings, ["length-judge"]) as endpoints:

            def build(s: Any) -> Any:
                return build_evaluator(s, endpoints, cache)

            def calls() -> int:
                return sum("<trajectory" in json.dumps(r["messages"]) for r in server.requests)

            identity = View("perm:0", list(range(len(group.members))))
            for probes in (settings.probes, settings.probes, settings.probes.model_copy(
                    update={"temperature": 0.7})):  # fmt: skip
                judge = ProbeJudge(spec, probes, build)
                ev = judge.for_view(identity)
                assert ev.spec.call.temperature == probes.temperature
                score_view("run", ev, "beta", group, identity)
            assert calls() == 2  # 0.0, 0.0 again (cached), then 0.7
            repeat = View("perm:0", identity.order, repeat=1)
            ev = ProbeJudge(spec, settings.probes, build).for_view(repeat)
            assert ev.spec.call.temperature == settings.probes.repeat_temperature


def test_the_default_minimum_leaves_two_tasks_without_cis(probed: dict[str, Any]) -> None:
    """analysis.min_ci_groups (5): the 2-task profile's figures keep their values and n, and
    no figure has a CI; the report says why."""
    metrics = compute_probe_metrics(
        probed["candidates"], probed["scores"], probed["settings"].probes, probed["families"],
        rule=probe_ci_rule(AnalysisSettings(min_ci_groups=5), probed["settings"].probes),
    )  # fmt: skip

    def ci_bounds(obj: Any) -> list[Any]:
        if isinstance(obj, dict):
            return [v for k, v in obj.items() if k.endswith(("_ci_low", "_ci_high"))] + [
                x for v in obj.values() for x in ci_bounds(v)
            ]
        return []

    bounds = ci_bounds(metrics)
    assert bounds and all(b is None for b in bounds)
    pos = metrics["judges"]["ruler-slot-judge"]["position"]
    assert pos["n_groups"] == 4 and pos["preference_fairness"] == -1.0
    # 4 probe groups from 2 tasks: the bootstrap's clusters are the 2 tasks
    assert pos["n_tasks"] == 2 and pos["preference_fairness_ci_reason"] == TOO_FEW
    cal = metrics["judges"]["ruler-slot-judge"]["calibration"]
    assert cal["roc_auc"] == 0.5 and cal["roc_auc_ci_reason"] == TOO_FEW
    from judgelab.report.probes import render_probe_report

    report = render_probe_report(metrics, {})
    assert TOO_FEW in report
    assert "-1.000 [" not in report and "-1.000 †" in report


def run_probe_command(
    project: Path, params: dict[str, Any], *args: str
) -> subprocess.CompletedProcess:
    """`judgelab probes [args]` in a scratch project holding `params` as its params.yaml."""
    (project / "params.yaml").write_text(yaml.safe_dump(params))
    env = {**os.environ, "JUDGELAB_ROOT": str(project), "JUDGELAB_CACHE": str(project / "c")}
    env.pop("PREFECT_HOME", None)  # the project's own, as a user's first run has
    return subprocess.run(
        [str(Path(sys.executable).parent / "judgelab"), "probes", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_probe_command_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`judgelab probes` (Prefect flow, CLI) against the biased loopback judges, in a scratch
    project: tables that validate, metrics.json with the slot judge's bias, report, plots. As a
    user's first run: no Prefect server set, so the command starts its temporary one."""
    monkeypatch.delenv("PREFECT_API_URL")
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
