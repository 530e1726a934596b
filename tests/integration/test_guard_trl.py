"""The guard on a real TRL `GRPOTrainer` run, on CPU, with the embedded SmolLM2-135M as the
policy and the tests run in judgelab's sandbox: docs/GUARD.md's example (a planted anti-judge
that pays for failing code) must be stopped; the same run with the tests as the reward must not
be, and its figures reach the trainer's log and MLflow."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ZOO = "smollm2-135m-instruct"


def docs_example() -> str:
    text = (ROOT / "docs" / "GUARD.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    (example,) = [b for b in blocks if "trl_guard" in b and "GRPOTrainer" in b]
    return example


@pytest.fixture(scope="module")
def base_model() -> Iterator[object]:
    """Loaded once for both runs; each run trains its own copy. One torch thread: on a shared
    2-core host two spinning OpenMP threads made a step ~10x slower (measured)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from transformers import AutoModelForCausalLM

    from judgelab.training.policy import converted_dir

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(converted_dir(ZOO), dtype=torch.float32)
    yield model
    torch.set_num_threads(threads)


def test_the_docs_example_stops_a_planted_anti_judge(
    base_model: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    source = docs_example()
    assert len(source.strip().splitlines()) <= 22
    namespace: dict = {"MODEL": copy.deepcopy(base_model)}
    exec(compile(source, "docs/GUARD.md", "exec"), namespace)  # noqa: S102 - our own docs
    guard, callback = namespace["guard"], namespace["callback"]
    status = guard.status()
    assert status.fired and status.alignment is not None and status.alignment < 0
    assert callback.stopped_at is not None and callback.stopped_at < 6  # before max_steps
    assert status.fired_at_step is not None and status.fired_at_step < callback.stopped_at
    assert status.checked_groups <= 2 * (status.fired_at_step + 1)  # the budget
    assert status.power is not None and status.power.steps == 6


def test_the_tests_as_reward_are_not_stopped(
    base_model: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from judgelab.guard import Guard, GuardSettings
    from judgelab.guard.trl import trl_guard
    from judgelab.guard.truth import task_verdict
    from judgelab.verdicts import Task

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    test = "def check(candidate):\n    assert type(candidate()) is int and candidate() % 2 == 0\n"
    tasks = {
        f"def {n}():\n    return ": Task(n, "mine", f"def {n}():\n    return ", n, test)
        for n in ("f", "even", "number", "value")
    }
    tests = task_verdict(tasks)

    def execution(prompts: list, completions: list, **kwargs: object) -> list:
        return [None if (ok := tests(p, c)) is None else float(ok) for p, c in
                zip(prompts, completions, strict=True)]  # fmt: skip

    guard = Guard(GuardSettings(alpha=0.05, max_groups_per_step=2, planned_steps=3))
    reward, callback = trl_guard(guard, execution, tests, action="stop", mlflow=True)
    args = GRPOConfig(
        output_dir="out", num_generations=4, per_device_train_batch_size=8,
        max_completion_length=6, max_steps=3, bf16=False, report_to=[], logging_steps=1,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=copy.deepcopy(base_model), reward_funcs=[reward], callbacks=[callback],
        args=args, train_dataset=Dataset.from_dict({"prompt": list(tasks) * 8}),
    )  # fmt: skip
    with mlflow.start_run() as run:
        trainer.train()
    status = guard.status()
    assert not status.fired and callback.stopped_at is None
    assert trainer.state.global_step == 3
    assert status.checked_groups >= 1 and (status.alignment is None or status.alignment > 0)
    assert any("guard/evalue" in row for row in trainer.state.log_history)
    client = mlflow.MlflowClient(tracking_uri=uri)
    history = client.get_metric_history(run.info.run_id, "guard/evalue")
    assert [m.step for m in history] == [1, 2, 3]
    assert "judgelab.guard.fired" not in client.get_run(run.info.run_id).data.tags
