"""The training-effect study at its tiniest, on a real embedded model (SmolLM2-135M, CPU).

The truth here is a test-only verdict (the parity of the completion's distinct characters):
SmolLM2 passes no HumanEval task, and these tests are about the study's own logic (pairing,
the steps, the bank effect), not about any judge or the sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from judgelab.cache import JsonCache
from judgelab.config import LoraSettings, RolloutSettings, TrainSettings
from judgelab.config.evaluators import FormatSettings
from judgelab.config.training import StudySettings
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.training.policy import Policy
from judgelab.training.study import Arm, Study
from judgelab.verdicts import Candidate, Task, Verdict


class Parity(PointwiseEvaluator):
    """Test-only: 1 when the completion has an even number of distinct characters (`invert`:
    the opposite; `flat`: 0.5 for all, no signal)."""

    protocol = "rule"

    def __init__(self, name: str, invert: bool = False, flat: bool = False) -> None:
        super().__init__(FormatSettings(name=name))
        self.invert, self.flat = invert, flat

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        if self.flat:
            return Verdict.scored(0.5)
        even = len(set(candidate.completion)) % 2 == 0
        return Verdict.scored(float(even != self.invert))


def _task(i: int) -> Task:
    return Task(f"toy/{i}", "toy", "", "f", "assert True", request=f"Write f{i}(x) in Python.")


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread: on a loaded 2-core host, two threads spinning at each barrier made
    this test 4x slower (measured: the bank round 196 s against 54 s)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_arms_share_groups_and_the_effect_is_antisymmetric(
    tmp_path: Path, one_thread: None
) -> None:
    torch.manual_seed(0)
    policy = Policy("smollm2-135m-instruct", LoraSettings(r=4, alpha=8), "cpu", dtype="float32")
    train = TrainSettings(k=4, max_tokens=16, learning_rate=1e-3)
    plan = StudySettings(flips=[], placebo=False, seeds=[0], steps=1, groups=2, bank_samples=4)
    arms = [Arm("truth", Parity("truth")), Arm("inverse", Parity("inverse", invert=True)),
            Arm("flat", Parity("flat", flat=True))]  # fmt: skip
    study = Study(arms, Parity("tests"), [_task(0), _task(1)], [_task(2), _task(3)], train, plan,
                  RolloutSettings(), JsonCache(tmp_path, "samples"))  # fmt: skip
    result = study.run(policy)

    assert result.bank["bank_samples"] == 8 and result.bank["bank_contrast_tasks"] >= 1
    by_arm = {a: [r for r in result.rewards if r["arm"] == a] for a in ("truth", "inverse")}
    ids = [r["candidate_id"] for r in by_arm["truth"]]
    assert len(ids) == 8 and ids == [r["candidate_id"] for r in by_arm["inverse"]]  # paired
    assert all(r["reward"] == float(r["passed"]) for r in by_arm["truth"])
    assert all(r["reward"] == 1.0 - float(r["passed"]) for r in by_arm["inverse"])

    effects = {e["arm"]: e for e in result.effects}
    assert effects["flat"]["steps"] == 0 and effects["flat"]["effect"] == 0.0
    t, i = effects["truth"], effects["inverse"]
    assert t["steps"] == i["steps"] == 1 and t["trajectories"] == i["trajectories"] > 0
    # The inverse's advantages are the truth's negated, so its first Adam step is the
    # truth's negated and the bank effect flips sign (to first order in the step).
    assert t["effect"] != 0.0
    assert t["effect"] == pytest.approx(-i["effect"], rel=0.25)
