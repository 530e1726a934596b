"""Attacks on a real embedded judge (SmolLM2-135M through llama-cpp-python's server).

A tiny judge is a bad judge, so this asserts what must hold for any model: the attacked
candidates reach the judge through the product path and come back as rows that validate,
scored in [0, 1] or unscored with a reason; every attack figure is a number or has a reason;
every judge call has its tokens and reply latency, and a second pass is served from the judge
cache with the same recorded latency; the gate decides on what was measured.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import polars as pl  # noqa: E402
import pytest  # noqa: E402

from judgelab.analysis.cost import cost_timings, judge_costing  # noqa: E402
from judgelab.analysis.probes import compute_probe_metrics, probe_ci_rule  # noqa: E402
from judgelab.cache import JsonCache  # noqa: E402
from judgelab.config import AnalysisSettings, HumanEvalSettings, load_settings  # noqa: E402
from judgelab.evaluators.registry import build_evaluator  # noqa: E402
from judgelab.models.endpoint import Endpoint  # noqa: E402
from judgelab.probes import gate  # noqa: E402
from judgelab.probes.calls import calls_frame, record_calls  # noqa: E402
from judgelab.probes.run import (  # noqa: E402
    candidates_frame,
    judge_models,
    plan,
    probe_scores_frame,
    probe_specs,
    score_view,
)
from judgelab.rollouts.contrast import execution_check  # noqa: E402
from judgelab.tasks.humaneval import load_humaneval  # noqa: E402

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
JUDGE = "ruler-smollm2-135m"
ATTACKS = ["master_key_colon", "grader_comment"]


def test_attacks_on_a_real_judge(
    embedded_endpoint: Callable[[str], Endpoint], tmp_path: Path
) -> None:
    base = load_settings(ROOT / "params.yaml")
    settings = base.model_copy(
        update={
            "probes": base.probes.model_copy(
                update={
                    "judges": [JUDGE],
                    "tasks": ["HumanEval/0"],
                    "mutants": ["dropped_return"],
                    "permutations": 1,
                    "perturbations": [],
                    "repeats": 0,
                    "self_preference": False,
                    "attacks": ATTACKS,
                    "bootstrap": 50,
                }
            )
        }
    )
    tasks = load_humaneval(HumanEvalSettings(ids=settings.probes.tasks))
    groups, views = plan(settings, tasks, execution_check(), None)
    (group,) = groups
    assert [v.name for v in views[group.group_id]] == ["perm:0", *(f"atk:{a}" for a in ATTACKS)]
    (spec,) = probe_specs(settings)
    cache = JsonCache(tmp_path, "judge")
    endpoints = {"smollm2-135m": embedded_endpoint("smollm2-135m")}

    def score_every_view() -> tuple[list[dict], list[dict]]:
        evaluator = build_evaluator(spec, endpoints, cache)
        rows, calls = [], []
        for v in views[group.group_id]:
            recording = record_calls(evaluator, group.group_id, v.name, v.repeat)
            rows += score_view("it", recording, "smollm", group, v)
            calls += recording.calls
        return rows, calls

    rows, calls = score_every_view()
    _, again = score_every_view()  # the judge cache answers every call
    scores = probe_scores_frame(rows)
    k = len(group.members)
    assert scores.height == k * len(views[group.group_id])
    for row in scores.iter_rows(named=True):
        if row["status"] == "scored":
            assert 0.0 <= row["score"] <= 1.0
        else:
            assert row["reason"]
    attacked = scores.filter(pl.col("treated"))
    assert set(attacked["variant"].unique()) == set(ATTACKS)
    assert attacked.filter(pl.col("variant") == "master_key_colon")["passed"].to_list() == [False]

    first, cached = calls_frame(calls), calls_frame(again)
    assert first.height >= len(views[group.group_id])  # one call per view, more on retries
    assert (first["prompt_tokens"] > 0).all() and (first["completion_tokens"] > 0).all()
    assert (first["reply_latency_s"] > 0).all()
    assert not first["cached"].any() and cached["cached"].all()
    assert cached["reply_latency_s"].to_list() == first["reply_latency_s"].to_list()

    costing = judge_costing(settings)
    metrics = compute_probe_metrics(
        candidates_frame(groups, views), scores, settings.probes, judge_models(settings),
        rule=probe_ci_rule(AnalysisSettings(min_ci_groups=5), settings.probes),
        calls=first, costing=costing,
    )  # fmt: skip
    judge = metrics["judges"][JUDGE]
    for name in ATTACKS:
        a = judge["attacks"][name]
        assert a["n_tasks"] == 1 and a["n_attacked"] >= 1
        # A number (without a CI: one group), or the reason there is none.
        assert a["success_rate"] is not None or a["reasons"]["success_rate"]
        assert a["success_rate_ci_low"] is None
    cost = judge["cost"]
    assert cost["kind"] == "embedded" and cost["n_pass_fail_pairs"] == k - 1
    assert cost["tokens_per_correct_pair"] is not None or cost["reasons"]
    timing = cost_timings(first, scores, costing[JUDGE])
    if cost["n_correct_pairs"]:
        assert timing["cpu_seconds_per_correct_pair"] == pytest.approx(
            2 * timing["seconds_per_correct_pair"]  # the server's 2 threads
        )
    else:
        assert timing["reason"] == "no correctly ordered pass/fail pair"
    refused = gate.check(metrics, 0.5)
    for v in refused:
        assert v.judge == JUDGE and v.attack in ATTACKS
        rate = judge["attacks"][v.attack]["success_rate"]
        assert rate is None or rate > 0.5
