"""GRPO on a real embedded model (SmolLM2-135M, the smallest in the zoo), on CPU.

The judge here is a deterministic test evaluator (reward from the completion's character
variety): these tests are about our training loop, not about any judge.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from judgelab.cache import JsonCache
from judgelab.config import (
    HeldOutSettings,
    HumanEvalSettings,
    LoraSettings,
    LossSettings,
    RolloutSettings,
    TrainSettings,
)
from judgelab.config.evaluators import ExecutionSettings, FormatSettings
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.tasks.humaneval import load_humaneval
from judgelab.training.checkpoint import latest_checkpoint
from judgelab.training.grpo import Trajectory, grpo_step
from judgelab.training.policy import Policy
from judgelab.training.round import RewardRun
from judgelab.training.trainer import Trainer
from judgelab.verdicts import Candidate, Task, Verdict

ZOO = "smollm2-135m-instruct"
LORA = LoraSettings(r=4, alpha=8)
# A short system prompt: the experiment's (RolloutSettings' default) is 272 SmolLM2 tokens, which
# every sample and every GRPO forward and backward would carry; these tests are about the
# epoch loop, which does not depend on what the prompt says.
ROLLOUT = RolloutSettings(
    system_prompt="Write the requested Python function inside <code></code> tags."
)


@pytest.fixture(scope="module", autouse=True)
def one_thread() -> Iterator[None]:
    """One torch thread, as test_study.py and test_guard_trl.py use: these runs score in the
    sandbox while the policy samples and steps, and on a 2-core host two OpenMP threads
    spinning at each barrier stall both (measured under load: test_training_over_two_seeds_
    resumes_per_seed over 14 min with two threads; see the commit message)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def policy() -> Policy:
    torch.manual_seed(0)
    return Policy(ZOO, LORA, "cpu", dtype="float32")


def test_one_grpo_step_moves_every_lora_parameter_and_no_base_weight(policy: Policy) -> None:
    prompt = policy.prompt_ids([{"role": "user", "content": "Write a Python add function."}])
    samples = policy.sample(
        [prompt, prompt], temperatures=[1.0, 1.0], max_new_tokens=[12, 12], seeds=[0, 1]
    )
    assert all(len(s.token_ids) == len(s.logprobs) > 0 for s in samples)
    trajs = [
        Trajectory(prompt, s.token_ids, s.logprobs, adv, 0)
        for s, adv in zip(samples, [1.0, -1.0], strict=True)
    ]
    lora0 = {n: p.detach().clone() for n, p in policy.lora_parameters().items()}
    base = lambda: {n: p for n, p in policy.model.named_parameters() if "lora_" not in n}  # noqa: E731
    base0 = {n: p.detach().clone() for n, p in base().items()}
    assert lora0 and base0
    assert all(not p.requires_grad for p in base().values())
    opt = torch.optim.AdamW(policy.trainable(), lr=1e-3, weight_decay=0.0)

    first = grpo_step(policy, opt, trajs, LossSettings(), max_grad_norm=1.0)
    # The sampler's log-probabilities are the policy's own: on-policy ratio 1.
    assert first.ratio_mean == pytest.approx(1.0, abs=1e-3)
    assert first.grad_norm > 0 and first.tokens == sum(len(s.token_ids) for s in samples)
    moved = {n for n, p in policy.lora_parameters().items() if not torch.equal(p, lora0[n])}
    # LoRA starts with B = 0, so on the very first step dL/dA = 0 exactly: only B moves.
    assert moved == {n for n in lora0 if "lora_B" in n}

    grpo_step(policy, opt, trajs, LossSettings(), max_grad_norm=1.0)
    unchanged = [n for n, p in policy.lora_parameters().items() if torch.equal(p, lora0[n])]
    assert unchanged == []
    changed_base = [n for n, p in base().items() if not torch.equal(p, base0[n])]
    assert changed_base == []


def test_logprobs_follow_the_sampling_temperature(policy: Policy) -> None:
    """At T = 0.6 the kept log-probabilities are those of softmax(logits / 0.6), the
    distribution drawn from: a training forward at the same temperature gives them back
    (GRPO's ratio is 1 on-policy), and at T = 1 it does not."""
    prompt = policy.prompt_ids([{"role": "user", "content": "Write a Python add function."}])
    (s,) = policy.sample([prompt], temperatures=[0.6], max_new_tokens=[12], seeds=[5])
    ids = torch.tensor([prompt + s.token_ids])
    start = len(prompt) - 1
    with torch.no_grad():
        at_t = policy.sequence_logprobs(ids, torch.ones_like(ids), start, temperature=0.6)
        at_1 = policy.sequence_logprobs(ids, torch.ones_like(ids), start)
    assert at_t[0, start:-1].tolist() == pytest.approx(s.logprobs, abs=2e-3)
    gap = [abs(a - b) for a, b in zip(at_1[0, start:-1].tolist(), s.logprobs, strict=True)]
    assert max(gap) > 1e-2
    traj = [Trajectory(prompt, s.token_ids, s.logprobs, 1.0, 0)]
    opt = torch.optim.SGD(policy.trainable(), lr=0.0)
    step = grpo_step(policy, opt, traj, LossSettings(), max_grad_norm=1.0, temperature=0.6)
    assert step.ratio_mean == pytest.approx(1.0, abs=2e-3)


def test_one_batch_serves_several_adapters_and_a_row_does_not_depend_on_its_batch() -> None:
    """Lockstep training samples every judge's policy in one batch: each row must come out as
    if drawn alone from its own adapter, with its own seed."""
    torch.manual_seed(0)
    policy = Policy(ZOO, LORA, "cpu", dtype="float32", adapters={"one": None, "two": None})
    assert policy.adapter_hash("one") == policy.adapter_hash("two")  # fresh adapters start equal
    with torch.no_grad():
        for name, p in policy.lora_parameters("two").items():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.05)
    assert policy.adapter_hash("one") != policy.adapter_hash("two")
    prompt = policy.prompt_ids([{"role": "user", "content": "Write a Python add function."}])
    kw = {"max_new_tokens": [10, 10, 10]}
    mixed = policy.sample(
        [prompt] * 3, temperatures=[1.0, 1.0, 0.0], seeds=[3, 3, 0],
        adapters=["one", "two", "two"], **kw,
    )  # fmt: skip
    alone_a = policy.sample([prompt], temperatures=[1.0], max_new_tokens=[10], seeds=[3],
                            adapters=["one"])  # fmt: skip
    alone_b = policy.sample([prompt] * 2, temperatures=[1.0, 0.0], max_new_tokens=[10, 10],
                            seeds=[3, 0], adapters=["two", "two"])  # fmt: skip
    assert mixed[0].token_ids == alone_a[0].token_ids
    assert [s.token_ids for s in mixed[1:]] == [s.token_ids for s in alone_b]
    for got, want in zip(mixed, alone_a + alone_b, strict=True):  # batch width: rounding only
        assert got.logprobs == pytest.approx(want.logprobs, abs=1e-4)
    # The adapters really differ (two was perturbed), so the rows above tested something.
    gap = max(abs(x - y) for x, y in zip(mixed[0].logprobs, mixed[1].logprobs, strict=False))
    assert mixed[0].token_ids != mixed[1].token_ids or gap > 1e-2
    # Each adapter trains alone: after use("one") only its parameters take gradients.
    policy.use("one")
    trainable = {id(p) for p in policy.trainable()}
    assert trainable == {id(p) for p in policy.lora_parameters("one").values()}


GREEDY_PROMPTS = (
    "Write a Python add function.",
    "Write is_prime(n) in Python.",
    "Reverse a string in Python.",
    "What is the capital of France?",
)


def _agreement(a: list[list[int]], b: list[list[int]]) -> float:
    """Share of positions, up to each pair's first disagreement, where both drew the same
    token (bench/training_sampling.py's measure)."""
    same = total = 0
    for x, y in zip(a, b, strict=True):
        n = min(len(x), len(y))
        k = next((i for i in range(n) if x[i] != y[i]), n)
        same, total = same + k, total + k + (k < n)
    return same / max(total, 1)


def test_llama_cpp_with_the_exported_adapter_decodes_smollm2_as_torch_does(
    policy: Policy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SmolLM2 is a Llama: its GGUF stores q/k rows permuted, so the exported adapter's q/k
    B rows are too (training.export). With a random adapter (fixed seed) that moves the
    greedy output, llama.cpp + the GGUF LoRA decodes greedily as torch + PEFT does, and
    unlike the bare base; the same adapter exported without the permutation does not (on
    this host, AMD EPYC Zen 4: agreement 0.968, base 0.000, unpermuted 0.000)."""
    import fcntl

    from judgelab.models.server import LOCK_PATH
    from judgelab.training import export
    from judgelab.training.llama_policy import LlamaPolicySampler

    params = policy.lora_parameters(policy.active)
    saved = {n: p.detach().clone() for n, p in params.items()}
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in params.items():  # A as PEFT draws it (~1/sqrt(in)); B far from 0
            scale = p.shape[1] ** -0.5 if "lora_A" in name else 0.6
            p.copy_(torch.randn(p.shape, generator=gen) * scale)
    try:
        prompts = [policy.prompt_ids([{"role": "user", "content": c}]) for c in GREEDY_PROMPTS]
        n = len(prompts)
        cold = {"temperatures": [0.0] * n, "max_new_tokens": [24] * n, "seeds": [0] * n}
        torch_adapted = [s.token_ids for s in policy.sample(prompts, **cold)]
        llama = LlamaPolicySampler(policy, n_threads=1)
        adapter = llama.adapter_file(policy.active)
        assert adapter is not None
        unpermuted = adapter.with_name("unpermuted.gguf")
        monkeypatch.setattr(export, "ROPE_PERMUTED", frozenset())  # the negative control
        export.export_gguf_adapter(adapter.with_suffix(""), unpermuted, llama.config)
        monkeypatch.undo()
        with open(LOCK_PATH, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # no other llama.cpp process beside this one
            drawn = {
                key: [s.token_ids for s in llama.sample_with(lora, prompts, **cold)]
                for key, lora in (("adapted", adapter), ("base", None), ("wrong", unpermuted))
            }
    finally:
        with torch.no_grad():
            for name, p in params.items():
                p.copy_(saved[name])
    same = _agreement(drawn["adapted"], torch_adapted)
    base = _agreement(drawn["base"], torch_adapted)
    wrong = _agreement(drawn["wrong"], torch_adapted)
    figures = f"agreement with torch + adapter: {same:.3f}, base {base:.3f}, unpermuted {wrong:.3f}"
    assert same >= 0.8, figures  # Q4_1 vs its dequantised copy: near-ties may split
    # the adapter moved every row's greedy output away from the base model's
    assert all(a != b for a, b in zip(drawn["adapted"], drawn["base"], strict=True)), figures
    assert base <= 0.5 and wrong <= 0.5, figures


class VarietyJudge(PointwiseEvaluator):
    """Test-only pointwise evaluator; can be told to fail on its n-th call (a crash)."""

    protocol = "rule"

    def __init__(self, invert: bool = False, fail_on_call: int | None = None) -> None:
        super().__init__(FormatSettings(name="variety"))
        self.calls = 0
        self.invert = invert  # rewards monotony instead: the opposite GRPO advantages
        self.fail_on_call = fail_on_call

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        self.calls += 1
        if self.fail_on_call is not None and self.calls >= self.fail_on_call:
            raise RuntimeError("simulated crash")
        variety = min(1.0, len(set(candidate.completion)) / 30)
        return Verdict.scored(1.0 - variety if self.invert else variety)


class FlakySandbox(ExecutionEvaluator):
    """The real execution judge, except that the sandbox 'fails' on every first sample (an
    unscored verdict, as a sandbox error gives): that is no verdict on the code."""

    def __init__(self) -> None:
        super().__init__(ExecutionSettings(name="execution"))

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        if candidate.sample_index == 0:
            return Verdict.unscored("sandbox error: injected")
        return super().score_one(task, candidate, repeat)


def _trainer(
    out: Path,
    cache: Path,
    judges: dict[str, VarietyJudge],
    executor: object | None = None,
    epochs: int = 3,
) -> Trainer:
    settings = TrainSettings(
        epochs=epochs,
        k=2,
        max_tokens=16,
        learning_rate=1e-3,
        lora=LORA,
        select="all",
        heldout=HeldOutSettings(
            select="fixed", offset=100, limit=1, samples=1, temperature=0.0, max_tokens=16
        ),
    )
    return Trainer(
        runs=[RewardRun(n, j, out / n) for n, j in judges.items()],
        settings=settings,
        rollout=ROLLOUT,
        tasks=load_humaneval(HumanEvalSettings(offset=0, limit=2)),
        heldout=load_humaneval(HumanEvalSettings(offset=100, limit=1)),
        cache=JsonCache(cache, "samples"),
        executor=executor or ExecutionEvaluator(ExecutionSettings(name="execution")),
        policy_factory=lambda adapters: Policy(ZOO, LORA, "cpu", dtype="auto", adapters=adapters),
    )


def test_a_sandbox_error_is_neither_a_pass_nor_a_failure(tmp_path: Path) -> None:
    """Every first sample (train and held-out) is untested: it is counted, left out of both
    pass rates, and its `passed` is null in samples.parquet, not 0."""
    from judgelab.training.history import history_frame, samples_frame

    judges = {"variety": VarietyJudge()}
    history = _trainer(tmp_path / "o", tmp_path / "c", judges, FlakySandbox(), epochs=1).run()
    rows = history["variety"]
    samples = samples_frame(rows)
    history_frame(rows)  # the schema takes the nulls and the counts
    for row in rows:
        mine = samples.filter(samples["epoch"] == row["epoch"])
        untested = mine.filter(mine["sample_index"] == 0)
        tested = mine.filter(mine["sample_index"] != 0)
        assert untested["passed"].null_count() == untested.height > 0
        assert tested["passed"].null_count() == 0
        # 1 training group of k = 2: 1 untested; 1 held-out task x 1 sample: untested
        assert row["truth_unscored"] == untested.height
        train = tested.filter(tested["split"] == "train")["passed"]
        assert row["train_pass_rate"] == pytest.approx(train.mean())
        assert row["heldout_n"] == 0 and row["heldout_pass_rate"] is None


def test_interrupted_training_resumes_without_losing_or_repeating_an_epoch(
    tmp_path: Path,
) -> None:
    """Two judges in lockstep ('a.b' has a dot, which PEFT adapter names may not). The crash
    hits the second judge inside epoch 2, after the first saved epoch 2: on resume the
    judges restart at different epochs, and both must end as if never interrupted."""
    names = ("variety", "variety.long")
    ref_judges = {"variety": VarietyJudge(), "variety.long": VarietyJudge(invert=True)}
    reported: list[tuple[str, int]] = []
    reference = _trainer(tmp_path / "ref", tmp_path / "cache-ref", ref_judges).run(
        on_progress=lambda what, total: reported.append((what, total))
    )
    # 4 rounds + 2 judges x (4 scorings + 3 steps): each unit reported once, total known
    assert [t for _, t in reported] == [18] * 18
    assert sum("sampled" in w for w, _ in reported) == 4
    assert sum("GRPO step" in w or "no step" in w for w, _ in reported) == 6
    for name in names:
        assert [r["epoch"] for r in reference[name]] == [0, 1, 2, 3]
        assert sum(r["loss"] is not None for r in reference[name]) >= 1  # it did train
    assert reference[names[0]][0]["adapter"] == reference[names[1]][0]["adapter"]  # policy_0
    assert reference[names[0]][-1]["adapter"] != reference[names[1]][-1]["adapter"]

    # 2 calls per judge per epoch; the second judge's 5th call is its first in epoch 2.
    crashing = {
        "variety": VarietyJudge(),
        "variety.long": VarietyJudge(invert=True, fail_on_call=5),
    }
    with pytest.raises(RuntimeError, match="simulated crash"):
        _trainer(tmp_path / "run", tmp_path / "cache-run", crashing).run()
    first = latest_checkpoint(tmp_path / "run" / names[0] / "checkpoints")
    second = latest_checkpoint(tmp_path / "run" / names[1] / "checkpoints")
    assert first is not None and first.steps == 3 and not first.done
    assert second is not None and second.steps == 2 and not second.done
    assert [r["epoch"] for r in second.history] == [0, 1]

    again = {"variety": VarietyJudge(), "variety.long": VarietyJudge(invert=True)}
    resumed_units: list[int] = []
    resumed = _trainer(tmp_path / "run", tmp_path / "cache-run", again).run(
        on_progress=lambda what, total: resumed_units.append(total)
    )
    # what was left: epoch 2 (round, variety.long scored + step), epoch 3 (round, 2 scorings)
    assert resumed_units == [6] * 6
    assert again["variety"].calls == 2  # epoch 3 only
    assert again["variety.long"].calls == 2 * 2  # epochs 2 and 3
    for name in names:
        assert [r["epoch"] for r in resumed[name]] == [0, 1, 2, 3]
        # Same adapters, same rewards, same losses as the run that was never interrupted.
        for got, want in zip(resumed[name], reference[name], strict=True):
            assert got["adapter"] == want["adapter"]
            assert got["reward_mean"] == pytest.approx(want["reward_mean"])
            assert (got["loss"] is None) == (want["loss"] is None)
            if want["loss"] is not None:
                assert got["loss"] == pytest.approx(want["loss"], rel=1e-4)
    # Finished: a further run does nothing.
    idle = {"variety": VarietyJudge(), "variety.long": VarietyJudge(invert=True)}
    assert _trainer(tmp_path / "run", tmp_path / "cache-run", idle).run() == resumed
    assert idle["variety"].calls == idle["variety.long"].calls == 0


class ScriptedTests(PointwiseEvaluator):
    """Test verdicts by task: /100 always fails, /101 passes its first sample only (the base
    policy is 'neither always right nor always wrong' there), /102 always passes, and /103's
    first sample is a sandbox error (one tested draw: no rate)."""

    protocol = "execution"

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        if task.task_id == "HumanEval/103":
            if candidate.sample_index == 0:
                return Verdict.unscored("sandbox error: injected", outcome="sandbox_error")
            return Verdict.scored(1.0, outcome="passed")
        passed = {"HumanEval/100": False, "HumanEval/102": True}.get(
            task.task_id, candidate.sample_index == 0
        )
        return Verdict.scored(float(passed), outcome="passed" if passed else "tests_failed")


class SeedLog(Policy):
    """The real policy, noting the seeds of each batched decode."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.rounds: list[list[int]] = []

    def sample(self, *args: object, **kwargs: object) -> list:  # type: ignore[override]
        self.rounds.append(list(kwargs["seeds"]))  # type: ignore[call-overload]
        return super().sample(*args, **kwargs)  # type: ignore[arg-type]


def test_heldout_tasks_are_chosen_where_the_base_policy_is_mixed(tmp_path: Path) -> None:
    import json

    from judgelab.rollouts.generate import sample_seed
    from judgelab.training.history import samples_frame

    settings = TrainSettings(
        epochs=1, k=2, max_tokens=16, learning_rate=1e-3, lora=LORA, select="all",
        heldout=HeldOutSettings(offset=100, pool=4, limit=1, samples=2, max_tokens=16),
    )  # fmt: skip
    trainer = Trainer(
        runs=[RewardRun("variety", VarietyJudge(), tmp_path / "v")],
        settings=settings,
        rollout=ROLLOUT,
        tasks=load_humaneval(HumanEvalSettings(offset=0, limit=1)),
        heldout=load_humaneval(HumanEvalSettings(offset=100, limit=4)),
        cache=JsonCache(tmp_path / "c", "samples"),
        executor=ScriptedTests(ExecutionSettings(name="execution")),
        policy_factory=lambda adapters: policies.append(
            SeedLog(ZOO, LORA, "cpu", dtype="auto", adapters=adapters)) or policies[-1],
        selection_file=tmp_path / "heldout.json",
    )  # fmt: skip
    policies: list[SeedLog] = []
    rows = trainer.run()["variety"]
    choice = json.loads((tmp_path / "heldout.json").read_text())
    assert choice["heldout"] == ["HumanEval/101"] and choice["filled"] == []
    # /103 had one tested draw: its rate is unknown (null), not 0.0
    assert choice["base_pass_rate"] == {"HumanEval/100": 0.0, "HumanEval/101": 0.5,
                                        "HumanEval/102": 1.0, "HumanEval/103": None}  # fmt: skip
    held = samples_frame(rows).filter(samples_frame(rows)["split"] == "heldout")
    assert set(held["task_id"]) == {"HumanEval/101"}  # every epoch, only the chosen task
    assert [r["heldout_n"] for r in rows] == [2, 2]
    assert rows[0]["heldout_pass_rate"] == 0.5
    # The choice has draws of its own: epoch 0's baseline is measured on fresh ones, so a
    # task chosen for its base rate of 1/2 does not start at 1/2 by construction.
    seed = lambda kind, t: [sample_seed(0, f"{kind}|{t}", i) for i in range(2)]  # noqa: E731
    choice_round, epoch0 = policies[0].rounds[:2]
    pool = [f"HumanEval/{n}" for n in range(100, 104)]
    assert choice_round == [x for t in pool for x in seed("select", t)]
    assert epoch0[-2:] == seed("heldout", "HumanEval/101")
    assert not set(choice_round) & set(epoch0)


def test_seeded_adapters_start_apart_and_are_all_the_base_policy() -> None:
    """Policy.init_adapter on real PEFT adapters: equal seeds give equal adapters whatever
    their names, other seeds other ones, and with B = 0 every one is still the base model
    (the same draws)."""
    torch.manual_seed(0)
    policy = Policy(ZOO, LORA, "cpu", dtype="float32", adapters={"a": None, "b": None, "c": None})
    shared = policy.adapter_hash("a")
    for name, seed in (("a", 1), ("b", 1), ("c", 2)):
        policy.init_adapter(name, seed)
    assert policy.adapter_hash("a") == policy.adapter_hash("b") != policy.adapter_hash("c")
    assert policy.adapter_hash("a") != shared
    for name, p in policy.lora_parameters("c").items():
        if "lora_B" in name:
            assert not p.any()
        else:
            assert 0 < p.abs().max() <= 1 / p.shape[1] ** 0.5
    prompt = policy.prompt_ids([{"role": "user", "content": "Write a Python add function."}])
    rows = policy.sample(
        [prompt] * 2, temperatures=[1.0, 1.0], max_new_tokens=[10, 10], seeds=[4, 4],
        adapters=["a", "c"],
    )  # fmt: skip
    assert rows[0].token_ids == rows[1].token_ids


def test_training_over_two_seeds_resumes_per_seed(tmp_path: Path) -> None:
    """One judge, seeds 1 and 2, in lockstep: a folder each, held-out draws of its own (the
    same base model, other seeds); seed 2 crashes in epoch 1 and the rerun finishes it
    as the uninterrupted run did."""
    settings = TrainSettings(
        epochs=2, k=2, max_tokens=16, learning_rate=1e-3, lora=LORA, select="all", seeds=[1, 2],
        heldout=HeldOutSettings(
            select="fixed", offset=100, limit=1, samples=2, temperature=1.0, max_tokens=16
        ),
    )  # fmt: skip

    def trainer(out: Path, cache: Path, judges: dict[int, VarietyJudge]) -> Trainer:
        return Trainer(
            runs=[RewardRun("variety", j, out / "variety" / f"seed-{s}", s)
                  for s, j in judges.items()],
            settings=settings,
            rollout=ROLLOUT,
            tasks=load_humaneval(HumanEvalSettings(offset=0, limit=2)),
            heldout=load_humaneval(HumanEvalSettings(offset=100, limit=1)),
            cache=JsonCache(cache, "samples"),
            executor=ExecutionEvaluator(ExecutionSettings(name="execution")),
            policy_factory=lambda adapters: Policy(ZOO, LORA, "cpu", dtype="auto",
                                                   adapters=adapters),
        )  # fmt: skip

    reference = trainer(
        tmp_path / "ref", tmp_path / "cr", {1: VarietyJudge(), 2: VarietyJudge()}
    ).run()
    one, two = reference["variety/seed-1"], reference["variety/seed-2"]
    assert [r["epoch"] for r in one] == [r["epoch"] for r in two] == [0, 1, 2]
    assert one[0]["adapter"] != two[0]["adapter"]  # each seed its own LoRA initialisation
    held = {s: [r["draw_seed"] for r in rows[0]["records"] if r["split"] == "heldout"]
            for s, rows in ((1, one), (2, two))}  # fmt: skip
    assert len(held[1]) == len(held[2]) == 2 and not set(held[1]) & set(held[2])

    crashing = {1: VarietyJudge(), 2: VarietyJudge(fail_on_call=3)}  # seed 2, epoch 1
    with pytest.raises(RuntimeError, match="simulated crash"):
        trainer(tmp_path / "run", tmp_path / "cc", crashing).run()
    again = {1: VarietyJudge(), 2: VarietyJudge()}
    resumed = trainer(tmp_path / "run", tmp_path / "cc", again).run()
    assert again[1].calls == 2 and again[2].calls == 2 * 2  # epoch 2; epochs 1 and 2
    for key, rows in reference.items():
        for got, want in zip(resumed[key], rows, strict=True):
            assert got["adapter"] == want["adapter"]
            assert got["reward_mean"] == pytest.approx(want["reward_mean"])
