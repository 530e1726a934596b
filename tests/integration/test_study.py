"""The training-effect study at its tiniest, on a real embedded model (SmolLM2-135M, CPU).

The truth here is a test-only verdict (the parity of the completion's distinct characters):
SmolLM2 passes no HumanEval task, and these tests are about the study's own logic (pairing,
the steps, the bank effect), not about any judge or the sandbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest
import torch

from judgelab.cache import JsonCache
from judgelab.config import LoraSettings, RolloutSettings, TrainSettings
from judgelab.config.evaluators import FormatSettings
from judgelab.config.training import StudySettings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.training.draws import PolicyDraws, TableDraws, fill_logprobs
from judgelab.training.grpo import grpo_step
from judgelab.training.policy import Policy
from judgelab.training.study import Arm, Study, trajectories
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


@pytest.fixture(scope="module")
def policy() -> Iterator[Policy]:
    """SmolLM2-135M with a LoRA adapter, loaded once for the module (each study re-initialises
    the adapter per arm and seed). One torch thread: on a loaded 2-core host, two threads
    spinning at each barrier made these tests 4x slower (measured: the bank round 196 s
    against 54 s)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield Policy("smollm2-135m-instruct", LoraSettings(r=4, alpha=8), "cpu", dtype="float32")
    torch.set_num_threads(before)


def test_arms_share_groups_and_the_effect_is_antisymmetric(tmp_path: Path, policy: Policy) -> None:
    train = TrainSettings(k=4, max_tokens=16, learning_rate=1e-3)
    plan = StudySettings(flips=[], placebo=False, seeds=[0], method="steps", steps=1, groups=2,
                         bank_samples=4)  # fmt: skip
    arms = [Arm("truth", Parity("truth")), Arm("inverse", Parity("inverse", invert=True)),
            Arm("flat", Parity("flat", flat=True))]  # fmt: skip
    draws = PolicyDraws([_task(0), _task(1)], [_task(2), _task(3)], plan, train,
                        RolloutSettings(), JsonCache(tmp_path, "samples"))  # fmt: skip
    study = Study(arms, Parity("tests"), draws, train, plan)
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


def _groups() -> dict[str, list[str]]:
    texts = [
        "def f(x): return x",
        "def f(x): return x + 1",
        "def f(x):\n    return 2 * x",
        "def f(x): pass",
    ]  # distinct characters: 12, 14, 15, 11 -> pass, pass, fail, fail
    groups = {f"toy/{i}": texts[i % 2 :] + texts[: i % 2] for i in range(5)}
    groups["toy/2"] = [texts[0], texts[1], texts[0], texts[1]]  # all pass: no contrast
    groups["toy/10"] = groups["toy/0"]  # sorts before toy/2 as text, comes last as a task
    return groups


TASKS = [_task(i) for i in (*range(5), 10)]


def _table(groups: dict[str, list[str]], writer: str) -> pl.DataFrame:
    """A rollouts table: each task's natural group from `writer`, and a known-truth contrast
    row for toy/0 that the study must leave out."""
    rows = [
        (task_id, i, f"{task_id}-{i}", writer, text, "stop" if i % 2 else "length")
        for task_id, texts in groups.items()
        for i, text in enumerate(texts)
    ] + [("toy/0", 9, "toy/0-ref", "reference", "def f0(x):\n    return x\n", None)]
    return pl.DataFrame(
        [
            {
                "task_id": t,
                "sample_index": i,
                "candidate_id": c,
                "policy": w,
                "model_sha256": "0" * 64,
                "seed": i,
                "completion": text,
                "finish_reason": finish,
                "messages_json": f'[{{"role": "user", "content": "Write {t}(x) in Python."}}]',
                "completion_tokens": len(text.split()),
                "latency_s": 0.0,
                "cache_key": c,
            }
            for t, i, c, w, text, finish in rows
        ]  # fmt: skip
    )


def test_a_study_of_an_audits_own_groups_resumes_from_its_results(
    tmp_path: Path, policy: Policy
) -> None:
    """`study.rollouts`: seed i trains on the i-th block of the table's policy groups (never
    its contrast rows), the bank is the first untrained tasks whose samples pass and fail,
    the first step's importance ratio is 1, and a second run trains nothing: every (arm,
    seed) comes from the results cache, equal."""
    frame = _table(_groups(), "smollm2")
    train = TrainSettings(k=4, max_tokens=16, learning_rate=1e-3)
    plan = StudySettings(flips=[], placebo=False, seeds=[0, 1], method="steps", steps=1, groups=1,
                         bank_size=2, rollouts="rollouts.parquet")  # fmt: skip
    with pytest.raises(ConfigError, match=r"train.policy \(qwen-0.5b\)"):
        TableDraws(frame, TASKS, plan, "qwen-0.5b")
    draws = TableDraws(frame, TASKS, plan, "smollm2")
    arms = [Arm("truth", Parity("truth")), Arm("inverse", Parity("inverse", invert=True))]

    drawn = draws.training(policy, 0, 0)
    assert [d.task.task_id for d in drawn] == ["toy/0"] and len(drawn[0].samples) == 4
    filled = fill_logprobs(policy, drawn, train.temperature)
    judged = Study(arms, Parity("tests"), draws, train, plan)._tests(filled)
    prompts = [policy.prompt_ids(d.messages) for d in filled]
    batch = trajectories(prompts, [d.samples for d in filled], judged)
    assert batch
    optimizer = torch.optim.AdamW(policy.trainable(), lr=train.learning_rate)
    step = grpo_step(policy, optimizer, batch, train.loss, train.max_grad_norm, train.temperature)
    assert step.ratio_mean == pytest.approx(1.0, abs=1e-4) and step.clip_fraction == 0.0

    results = JsonCache(tmp_path, "study")
    first = Study(arms, Parity("tests"), draws, train, plan, results=results).run(policy)
    trained = {(r["seed"], r["task_id"]) for r in first.rewards}
    assert trained == {(0, "toy/0"), (1, "toy/1")}  # the tasks table's order, not the text's
    assert "toy/0-ref" not in {r["candidate_id"] for r in first.rewards}
    assert first.bank == {"bank_samples": 8, "bank_tasks": 2, "bank_contrast_tasks": 2,
                          "bank_passing": 4}  # toy/3 and toy/4; toy/2 all pass  # fmt: skip
    effects = {(e["arm"], e["seed"]): e["effect"] for e in first.effects}
    for seed in (0, 1):
        assert effects["truth", seed] == pytest.approx(-effects["inverse", seed], rel=0.25)
    assert first.seconds["cached_arms"] == 0

    again = Study(arms, Parity("tests"), draws, train, plan, results=results).run(policy)
    assert again.seconds["cached_arms"] == 4
    assert {(e["arm"], e["seed"]): e["effect"] for e in again.effects} == effects


def test_the_first_order_study_predicts_a_real_sgd_step_and_resumes(
    tmp_path: Path, policy: Policy
) -> None:
    """`method: first-order` on an audit's own groups: the inverse arm's effect is exactly the
    truth's negated, the flat arm moves nothing, each (arm, seed, task) has its terms; the
    truth's effect is what one real GRPO step of plain SGD does to the bank on this model;
    and a second run takes every seed's slopes from the results cache."""
    from judgelab.training.effect import bank_logprobs, effect

    train = TrainSettings(k=4, max_tokens=16, learning_rate=1e-3)
    plan = StudySettings(flips=[], placebo=False, seeds=[0, 1], groups=1, bank_size=2,
                         rollouts="rollouts.parquet")  # fmt: skip
    assert plan.method == "first-order"
    draws = TableDraws(_table(_groups(), "smollm2"), TASKS, plan, "smollm2")
    arms = [Arm("truth", Parity("truth")), Arm("inverse", Parity("inverse", invert=True)),
            Arm("flat", Parity("flat", flat=True))]  # fmt: skip
    results = JsonCache(tmp_path, "study")
    first = Study(arms, Parity("tests"), draws, train, plan, results=results).run(policy)
    effects = {(e["arm"], e["seed"]): e for e in first.effects}
    for seed in (0, 1):
        truth = effects["truth", seed]["effect"]
        assert truth != 0.0 and effects["inverse", seed]["effect"] == pytest.approx(-truth)
        assert effects["flat", seed]["effect"] == 0.0
        assert effects["flat", seed]["stepped_groups"] == 0
    # first order: both seeds on the same groups (they differ in their adapter only)
    assert {(t["arm"], t["seed"], t["task_id"]) for t in first.terms} == {
        (a, s, "toy/0") for a in ("truth", "inverse", "flat") for s in (0, 1)}  # fmt: skip
    assert effects["truth", 0]["effect"] != effects["truth", 1]["effect"]

    # seed 0's truth arm, stepped for real: plain SGD at the learning rate, no clip
    study = Study(arms, Parity("tests"), draws, train, plan)
    bank = study.bank(policy)
    policy.init_adapter(policy.active, 0)
    drawn = fill_logprobs(policy, draws.training(policy, 0, 0), train.temperature)
    prompts = [policy.prompt_ids(d.messages) for d in drawn]
    batch = trajectories(prompts, [d.samples for d in drawn], study._tests(drawn))
    with policy.model.disable_adapter():
        before = bank_logprobs(policy.model, bank.items, policy.pad_id)
    sgd = torch.optim.SGD(policy.trainable(), lr=train.learning_rate)
    grpo_step(policy, sgd, batch, train.loss, 1e9, train.temperature, rows_per_forward=train.k)
    measured, _ = effect(before, bank_logprobs(policy.model, bank.items, policy.pad_id), bank)
    assert measured == pytest.approx(effects["truth", 0]["effect"], rel=0.1)

    hits = results.hits
    again = Study(arms, Parity("tests"), draws, train, plan, results=results).run(policy)
    assert results.hits == hits + 2  # one slopes entry per seed
    assert [e["effect"] for e in again.effects] == [e["effect"] for e in first.effects]
