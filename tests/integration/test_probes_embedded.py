"""The probe path with a real embedded judge (SmolLM2-135M through llama-cpp-python's server).

A tiny judge is a bad judge, so this asserts only what must hold for any model: every view
becomes rows that validate, each row is scored in [0, 1] or unscored with a reason, the slot
is the position in the view, and the figures come out as numbers or with a reason.
"""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from judgelab.analysis.probes import compute_probe_metrics, probe_ci_rule  # noqa: E402
from judgelab.cache import JsonCache  # noqa: E402
from judgelab.config import AnalysisSettings, HumanEvalSettings, load_settings  # noqa: E402
from judgelab.evaluators.registry import build_evaluator  # noqa: E402
from judgelab.models.endpoint import Endpoint  # noqa: E402
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


def test_probe_views_with_a_real_judge(
    embedded_endpoint: Callable[[str], Endpoint], tmp_path: Path
) -> None:
    base = load_settings(ROOT / "params.yaml")
    settings = base.model_copy(
        update={
            "probes": base.probes.model_copy(
                update={
                    "judges": ["ruler-smollm2-135m"],
                    "tasks": ["HumanEval/13"],
                    "mutants": ["dropped_return"],
                    "perturbations": [],
                    "repeats": 0,
                    "self_preference": False,
                    "attacks": [],  # tests/integration/test_attacks_embedded.py's
                    "bootstrap": 50,
                }
            )
        }
    )
    tasks = load_humaneval(HumanEvalSettings(ids=settings.probes.tasks))
    groups, views = plan(settings, tasks, execution_check(), None)
    (spec,) = probe_specs(settings)
    evaluator = build_evaluator(
        spec, {"smollm2-135m": embedded_endpoint("smollm2-135m")}, JsonCache(tmp_path, "judge")
    )
    rows = [
        row
        for g in groups
        for v in views[g.group_id]
        for row in score_view("it", evaluator, "smollm", g, v)
    ]
    scores = probe_scores_frame(rows)
    k = len(groups[0].members)
    assert scores.height == 2 * k  # identity + reversal
    for row in scores.iter_rows(named=True):
        assert row["slot"] in range(k)
        if row["status"] == "scored":
            assert 0.0 <= row["score"] <= 1.0
        else:
            assert row["reason"]
    rev = scores.filter(scores["view"] == "perm:1").sort("slot")["base_id"].to_list()
    ident = scores.filter(scores["view"] == "perm:0").sort("slot")["base_id"].to_list()
    assert rev == ident[::-1]
    metrics = compute_probe_metrics(
        candidates_frame(groups, views), scores, settings.probes, judge_models(settings),
        rule=probe_ci_rule(AnalysisSettings(min_ci_groups=5), settings.probes),
    )  # fmt: skip
    pos = metrics["judges"]["ruler-smollm2-135m"]["position"]
    # A number, or a reason why not (small judges often leave candidates unscored).
    for key in ("position_consistency", "top_choice_agreement", "preference_fairness"):
        assert pos.get(key) is not None or pos.get("reason") or key in pos["reasons"]
