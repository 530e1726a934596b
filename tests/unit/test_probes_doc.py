"""The probes' judge-call counts that docs/PROBES.md and params.yaml state are what the probes'
own plan makes of params.yaml: one call per view, planned by `probes.run.plan` on real
HumanEval tasks with the sandboxed tests as the check. docs/ENDPOINTS.md links to PROBES.md
for the count instead of repeating it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from judgelab.config import HumanEvalSettings, load_settings
from judgelab.probes.attacks import ATTACK
from judgelab.probes.run import plan
from judgelab.rollouts.contrast import execution_check
from judgelab.tasks.humaneval import load_humaneval

ROOT = Path(__file__).resolve().parents[2]


def flat(path: str) -> str:
    return " ".join((ROOT / path).read_text().split())


@pytest.fixture(scope="module")
def calls() -> dict[str, int]:
    """Judge calls per judge and task, of the bias probes and of the attacks (the same for
    every task of params.yaml's profile), and the number of tasks."""
    settings = load_settings(ROOT / "params.yaml")
    tasks = load_humaneval(HumanEvalSettings(ids=list(settings.probes.tasks)))
    writers = [("writer-a", "a", "pass"), ("writer-b", "b", "pass")]  # self-preference samples
    groups, views = plan(
        settings, tasks, execution_check(), lambda ts: {t.task_id: writers for t in ts}
    )
    assert {g.probe for g in groups} == {"calibration", "self_preference"}
    per_task: dict[str, list[str]] = {t.task_id: [] for t in tasks}
    for g in groups:
        per_task[g.task.task_id] += [v.name for v in views[g.group_id]]
    counts = {
        (sum(not n.startswith(ATTACK) for n in names), sum(n.startswith(ATTACK) for n in names))
        for names in per_task.values()
    }
    assert len(counts) == 1, per_task  # every task of the profile costs the same
    ((bias, attacks),) = counts
    return {"bias": bias, "attacks": attacks, "tasks": len(tasks)}


def test_the_plan_is_what_the_settings_ask(calls: dict[str, int]) -> None:
    probes = load_settings(ROOT / "params.yaml").probes
    # the known-truth group: each order, each repeat and each perturbation; the
    # self-preference group: each order and each repeat
    per_group = probes.permutations + probes.repeats
    assert calls["bias"] == 2 * per_group + len(probes.perturbations)
    assert calls["attacks"] == len(probes.attacks)


def test_probes_md_states_the_count(calls: dict[str, int]) -> None:
    doc = flat("docs/PROBES.md")
    bias, attacks, n = calls["bias"], calls["attacks"], calls["tasks"]
    assert (
        f"That is {n * (bias + attacks)} judge calls per judge ({n * bias} for the bias probes, "
        f"{n * attacks} for the attacks: one per attack and task)"
    ) in doc
    assert f"Each task adds {bias + attacks} calls per judge ({bias} for the bias probes" in doc


def test_params_yaml_states_the_count(calls: dict[str, int]) -> None:
    text = " ".join(re.sub(r"\n\s*#", " ", (ROOT / "params.yaml").read_text()).split())
    bias, attacks, n = calls["bias"], calls["attacks"], calls["tasks"]
    assert f"{n * (bias + attacks)} judge calls per judge: {n * bias} for the bias probes" in text
    assert f"{n * attacks} for the attacks" in text
    assert f"Each task adds {bias + attacks} calls per judge ({bias} + one" in text


def test_endpoints_and_benchmarks_link_to_the_count() -> None:
    endpoints, benchmarks = flat("docs/ENDPOINTS.md"), flat("docs/BENCHMARKS.md")
    assert "the probes add the judge calls [PROBES.md](PROBES.md) counts" in endpoints
    assert not re.search(r"probes add \d+ calls", endpoints)
    assert "Each task now adds the calls per judge that [PROBES.md](PROBES.md) counts" in benchmarks
    assert not re.search(r"Each task adds \d+ calls per judge now", benchmarks)
