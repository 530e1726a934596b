"""Training's task pools come from the task sources: a CodeI/O task trains and
is held out as a HumanEval task is. The tasks are built by the real registry; the loop runs
on the stand-in policy of test_training_seeds (our bookkeeping, not a model's behaviour)."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgelab.cache import JsonCache
from judgelab.config import HeldOutSettings, HumanEvalSettings, RolloutSettings, load_settings
from judgelab.config.evaluators import ExecutionSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.tasks import tasks_frame, tasks_from_frame
from judgelab.tasks.humaneval import load_humaneval
from judgelab.tasks.registry import tasks_by_id
from judgelab.training.plan import trained_tasks
from judgelab.training.round import RewardRun
from judgelab.training.run import heldout_ids, heldout_tasks
from judgelab.training.trainer import Trainer
from judgelab.verdicts import Candidate
from tests.unit.test_training_seeds import SETTINGS, StandInPolicy, TokenJudge

ROOT = Path(__file__).resolve().parents[2]


def with_heldout(**heldout: object) -> object:
    settings = load_settings(ROOT / "params.yaml")
    tasks = settings.tasks.model_copy(
        update={"codeio": settings.tasks.codeio.model_copy(update={"cases": 3})}
    )
    train = settings.train.model_copy(update={"heldout": HeldOutSettings(**heldout)})
    return settings.model_copy(update={"tasks": tasks, "train": train})


def test_the_default_pool_is_humaneval_by_offset() -> None:
    """No ids: HumanEval[offset : offset + pool] (mixed) or [.. + limit] (fixed), as before."""
    assert heldout_ids(with_heldout(offset=2, pool=6, limit=2)) == [
        f"HumanEval/{i}" for i in range(2, 8)
    ]
    assert heldout_ids(with_heldout(select="fixed", offset=162, limit=4)) == [
        "HumanEval/162",
        "HumanEval/163",
    ]
    assert heldout_ids(with_heldout(select="fixed", ids=["codeio-hq/3", "HumanEval/40"],
                                    limit=1)) == ["codeio-hq/3"]  # fmt: skip
    with pytest.raises(ValueError, match="must not exceed the 1 ids"):
        HeldOutSettings(ids=["HumanEval/40"], limit=2)
    with pytest.raises(ValueError, match="listed twice"):
        HeldOutSettings(ids=["HumanEval/40", "HumanEval/40"], limit=1)


def test_a_codeio_task_enters_both_training_pools(tmp_path: Path) -> None:
    """A CodeI/O item named in train.heldout.ids is built by its source (tests from
    tasks.codeio's settings) and held out; one in the tasks table is trained on. Both get
    the execution judge's real verdicts in the samples table, and the held-out task's
    reference passes its tests under the trainer's executor."""
    settings = with_heldout(select="fixed", ids=["codeio-hq/3", "HumanEval/40"], limit=2)
    held = heldout_tasks(settings, ROOT)
    assert [(t.task_id, t.source) for t in held] == [
        ("codeio-hq/3", "codeio"),
        ("HumanEval/40", "humaneval"),
    ]
    # the training pool is the tasks table: a CodeI/O task as the tasks stage froze it
    train = tasks_from_frame(tasks_frame(tasks_by_id(settings.tasks, ROOT, ["codeio-hq/5"], "t")))
    executor = ExecutionEvaluator(ExecutionSettings(name="execution"))
    trainer = Trainer(
        runs=[RewardRun("a", TokenJudge(), tmp_path / "a")],
        settings=SETTINGS.model_copy(update={"epochs": 1, "heldout": settings.train.heldout}),
        rollout=RolloutSettings(),
        tasks=train,
        heldout=held,
        cache=JsonCache(tmp_path / "c", "samples"),
        executor=executor,
        policy_factory=lambda adapters: StandInPolicy(adapters, {}),  # type: ignore[arg-type,return-value]
    )
    records = [s for row in trainer.run()["a"] for s in row["records"]]
    seen = {(s["split"], s["task_id"]) for s in records if s["passed"] is not None}
    assert {("train", "codeio-hq/5"), ("heldout", "codeio-hq/3"), ("heldout", "HumanEval/40")} <= (
        seen
    )
    reference = f"```python\n{held[0].canonical_solution}\n```"
    verdict = executor.score_one(held[0], Candidate("codeio-hq/3", "ref", 0, reference))
    assert verdict.score == 1.0


def test_a_heldout_task_no_source_holds_is_named() -> None:
    with pytest.raises(ConfigError, match=r"train.heldout.ids: no task source holds \['mbpp/1'\]"):
        heldout_tasks(with_heldout(select="fixed", ids=["mbpp/1"], limit=1), ROOT)


def test_held_out_tasks_are_apart_from_the_trained_ones_not_from_the_whole_table(
    tmp_path: Path,
) -> None:
    """An audit of every problem trains on the few tasks its epochs and groups cycle through
    (epochs 0..E, the last scoring the final policy); the rest of the tasks table may be
    held out, a task a training group draws from may not."""
    tasks = load_humaneval(HumanEvalSettings(offset=0, limit=10))
    trained = trained_tasks(tasks, epochs=2, groups_per_epoch=2)
    assert [t.task_id for t in trained] == [f"HumanEval/{i}" for i in range(6)]
    assert [t.task_id for t in trained_tasks(tasks[:3], 1, 4)] == [t.task_id for t in tasks[:3]]

    def trainer(heldout: list) -> Trainer:
        return Trainer(
            runs=[RewardRun("a", TokenJudge(), tmp_path / "a")],
            settings=SETTINGS.model_copy(update={"epochs": 2, "groups_per_epoch": 2}),
            rollout=RolloutSettings(),
            tasks=tasks,
            heldout=heldout,
            cache=JsonCache(tmp_path / "c", "samples"),
            executor=ExecutionEvaluator(ExecutionSettings(name="execution")),
            policy_factory=lambda adapters: StandInPolicy(adapters, {}),  # type: ignore[arg-type,return-value]
        )

    assert trainer(tasks[6:]).pool == tasks[6:]  # in the table, never trained on: held out
    with pytest.raises(ConfigError, match=r"tasks \['HumanEval/5'\] are also trained on"):
        trainer(tasks[5:7])
