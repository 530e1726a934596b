"""The scores stage's call list (`scoring.stage_calls`), which the flow and `judgelab.score`
both run: evaluator-major, a judge repeated, a rule once, tasks in the tasks table's order."""

from __future__ import annotations

from types import SimpleNamespace

from judgelab.config.evaluators import SETTINGS
from judgelab.evaluators.registry import build_evaluator
from judgelab.scoring import stage_calls
from judgelab.verdicts import Candidate, Task


def test_calls_are_evaluator_major_and_skip_tasks_without_groups() -> None:
    syntax = build_evaluator(SETTINGS["syntax"](name="syntax"), {})
    # a stand-in judge: stage_calls reads only its name and how often it repeats
    judge = SimpleNamespace(name="j", spec=SimpleNamespace(repeats=lambda n: n))
    tasks = [Task(task_id=t, source="autorl", prompt="p") for t in ("b", "a", "c")]
    groups = {
        ("a", "natural"): [Candidate("a", "a0", 0, "x")],
        ("b", "natural"): [Candidate("b", "b0", 0, "x")],
        ("b", "contrast"): [Candidate("b", "b1", 1, "x")],
    }
    calls = stage_calls("run", [syntax, judge], tasks, groups, repeats=2)
    assert [c.label for c in calls] == [
        "syntax b natural r0", "syntax b contrast r0", "syntax a natural r0",
        "j b natural r0", "j b contrast r0", "j a natural r0",
        "j b natural r1", "j b contrast r1", "j a natural r1",
    ]  # fmt: skip
    assert calls[1].candidates == groups[("b", "contrast")]
    assert {c.run_id for c in calls} == {"run"}
    rows = calls[0]().rows
    assert [(r["candidate_id"], r["evaluator"], r["repeat"]) for r in rows] == [("b0", "syntax", 0)]
