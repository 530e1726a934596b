"""Training over several seeds (`train.seeds`): the layout, each run's seeds and starting
adapter, lockstep and resume per (judge, seed). The policy is a stand-in with LoRA-shaped
weights over an 8-token vocabulary: these tests are about our loop's planning and
bookkeeping, not about a model (tests/integration/test_training.py trains a real one)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch

from judgelab.cache import JsonCache
from judgelab.config import (
    HeldOutSettings,
    HumanEvalSettings,
    RolloutSettings,
    TrainSettings,
)
from judgelab.config.evaluators import FormatSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.tasks.humaneval import load_humaneval
from judgelab.training.checkpoint import latest_checkpoint
from judgelab.training.layout import RunDir, planned_runs, run_dirs
from judgelab.training.policy import Sample, seeded_lora_init
from judgelab.training.round import RewardRun
from judgelab.training.trainer import Trainer
from judgelab.verdicts import Candidate, Task, Verdict

VOCAB = 8
BASE_LOGITS = torch.linspace(-1.0, 1.0, VOCAB)


class StandInPolicy:
    """LoRA in miniature: per adapter A [2, 4] and B [4, 2]; the logits of every prompt are
    BASE_LOGITS + (B @ A) flattened, so B = 0 is the base policy. Fresh adapters start equal
    (A = 1), as `Policy`'s do; `init_adapter` is the real seeded initialisation."""

    zoo_name = "stand-in"
    dtype = "float32"
    device = "cpu"
    pad_id = 0

    def __init__(self, adapters: Mapping[str, Path | None], log: dict) -> None:
        self.model = torch.nn.Module()
        self.weights: dict[str, dict[str, torch.nn.Parameter]] = {}
        self.log = log  # what the trainer asked for, across policy instances
        for name, path in adapters.items():
            state = {"m.lora_A.weight": torch.ones(2, 4), "m.lora_B.weight": torch.zeros(4, 2)}
            if path is not None:
                state = torch.load(path / "adapter.pt", weights_only=True)
            self.weights[name] = {k: torch.nn.Parameter(v.clone()) for k, v in state.items()}
        self.active = next(iter(adapters))

    def init_adapter(self, name: str, seed: int) -> None:
        self.log.setdefault("init", []).append((name, seed))
        seeded_lora_init(self.weights[name], seed)

    def use(self, name: str) -> None:
        self.active = name

    def trainable(self) -> list[torch.nn.Parameter]:
        return list(self.weights[self.active].values())

    def adapter_hash(self, name: str) -> str:
        h = hashlib.sha256()
        for key, p in sorted(self.weights[name].items()):
            h.update(key.encode() + p.detach().numpy().tobytes())
        return h.hexdigest()[:16]

    def _logits(self, name: str) -> torch.Tensor:
        w = self.weights[name]
        return BASE_LOGITS + (w["m.lora_B.weight"] @ w["m.lora_A.weight"]).flatten()[:VOCAB]

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        return [1, 2]

    def sample(self, prompts: list, *, temperatures, max_new_tokens, seeds, adapters) -> list:
        out = []
        for temp, seed, name in zip(temperatures, seeds, adapters, strict=True):
            self.log.setdefault("draws", []).append((name, seed))
            with torch.no_grad():
                logp = torch.log_softmax(self._logits(name) / temp, dim=-1)
            tok = int(
                torch.multinomial(logp.exp(), 1, generator=torch.Generator().manual_seed(seed))
            )
            out.append(Sample([tok], [float(logp[tok])], f"t{tok}", "stop"))
        return out

    def sequence_logprobs(self, tokens, attention_mask, start=0, temperature=1.0):
        logp = torch.log_softmax(self._logits(self.active) / temperature, dim=-1)
        picked = logp[tokens[:, start + 1 :]]
        return torch.nn.functional.pad(picked, (start, 1), value=0.0)

    def write_adapter(self, directory: Path, name: str) -> None:
        torch.save({k: p.detach() for k, p in self.weights[name].items()}, directory / "adapter.pt")


def token(c: Candidate) -> int:
    return int(c.completion[1:])


class TokenJudge(PointwiseEvaluator):
    """Reward: the sampled token / 7. Raises on its `fail_on_call`-th call (a crash)."""

    protocol = "rule"

    def __init__(self, fail_on_call: int | None = None) -> None:
        super().__init__(FormatSettings(name="token"))
        self.calls, self.fail_on_call = 0, fail_on_call

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        self.calls += 1
        if self.fail_on_call is not None and self.calls >= self.fail_on_call:
            raise RuntimeError("simulated crash")
        return Verdict.scored(token(candidate) / (VOCAB - 1))


class EvenTokenTests(PointwiseEvaluator):
    """The 'tests': an even token passes."""

    protocol = "execution"

    def __init__(self) -> None:
        super().__init__(FormatSettings(name="execution"))

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        passed = token(candidate) % 2 == 0
        return Verdict.scored(float(passed), outcome="passed" if passed else "tests_failed")


SETTINGS = TrainSettings(
    epochs=2,
    k=4,
    seed=1,
    select="all",  # these tests are about the loop's bookkeeping on fixed tasks
    learning_rate=0.5,
    heldout=HeldOutSettings(select="fixed", offset=100, limit=2, samples=3),
)


def trainer(runs: list[RewardRun], cache: Path, log: dict) -> Trainer:
    return Trainer(
        runs=runs,
        settings=SETTINGS,
        rollout=RolloutSettings(),
        tasks=load_humaneval(HumanEvalSettings(offset=0, limit=2)),
        heldout=load_humaneval(HumanEvalSettings(offset=100, limit=2)),
        cache=JsonCache(cache, "samples"),
        executor=EvenTokenTests(),
        policy_factory=lambda adapters: StandInPolicy(adapters, log),  # type: ignore[arg-type,return-value]
    )


def seeded_runs(out: Path, judges: Mapping[tuple[str, int], TokenJudge]) -> list[RewardRun]:
    return [RewardRun(j, ev, out / j / f"seed-{s}", s) for (j, s), ev in judges.items()]


# ------------------------------------------------------------------ layout


def test_layout_is_todays_without_seeds_and_per_seed_with_them(tmp_path: Path) -> None:
    assert planned_runs(tmp_path, ["a", "b"], []) == [
        RunDir("a", None, tmp_path / "a"),
        RunDir("b", None, tmp_path / "b"),
    ]
    seeded = planned_runs(tmp_path, ["a", "b"], [3, 1])
    assert [(r.judge, r.seed, r.path.relative_to(tmp_path).as_posix()) for r in seeded] == [
        ("a", 3, "a/seed-3"), ("a", 1, "a/seed-1"), ("b", 3, "b/seed-3"), ("b", 1, "b/seed-1"),
    ]  # fmt: skip
    assert [r.label for r in seeded][:2] == ["a/seed-3", "a/seed-1"]


def test_run_dirs_finds_both_layouts_and_refuses_a_mixture(tmp_path: Path) -> None:
    (tmp_path / "a" / "checkpoints").mkdir(parents=True)  # single-seed, mid-training
    for s in (10, 2):
        (tmp_path / "b" / f"seed-{s}").mkdir(parents=True)
        (tmp_path / "b" / f"seed-{s}" / "history.parquet").write_bytes(b"")
    (tmp_path / "b" / "seed-3").mkdir()  # no output yet: not a run
    (tmp_path / "c").mkdir()  # nothing in it
    found = run_dirs(tmp_path)
    assert [(r.judge, r.seed) for r in found] == [("a", None), ("b", 2), ("b", 10)]
    assert run_dirs(tmp_path / "missing") == []
    (tmp_path / "b" / "history.parquet").write_bytes(b"")  # a stale single-seed run beside
    with pytest.raises(ConfigError, match="both a single-seed run and seed-<s> runs"):
        run_dirs(tmp_path)


def test_seeds_must_be_distinct() -> None:
    assert TrainSettings().seeds == []
    with pytest.raises(ValueError, match="a seed is listed twice"):
        TrainSettings(seeds=[1, 2, 1])


# ------------------------------------------------------------------ seeding


def test_seeded_lora_init_is_peft_default_from_the_seed_alone() -> None:
    """A ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming-uniform, a = sqrt(5): gain sqrt(1/3)
    times sqrt(3 / fan_in)), drawn from the seed's own generator; B = 0."""

    def fresh() -> dict[str, torch.Tensor]:
        return {
            "q.lora_A.weight": torch.full((3, 16), 9.0),
            "q.lora_B.weight": torch.ones(16, 3),
            "v.lora_A.weight": torch.full((3, 16), 9.0),
            "v.lora_B.weight": torch.ones(16, 3),
        }

    torch.manual_seed(0)
    expected_global = torch.rand(3)
    torch.manual_seed(0)
    one, again, other = fresh(), fresh(), fresh()
    seeded_lora_init(one, 7)
    assert torch.equal(torch.rand(3), expected_global)  # the global RNG is untouched
    seeded_lora_init(again, 7)
    seeded_lora_init(other, 8)
    # by hand: one generator, names in order (q before v), uniform on the bound
    gen = torch.Generator().manual_seed(7)
    bound = 1 / math.sqrt(16)
    for name in ("q.lora_A.weight", "v.lora_A.weight"):
        want = torch.empty(3, 16).uniform_(-bound, bound, generator=gen)
        assert torch.equal(one[name], want)
        assert one[name].abs().max() <= bound
    assert all(torch.equal(one[n], again[n]) for n in one)
    assert not torch.equal(one["q.lora_A.weight"], other["q.lora_A.weight"])
    assert all(not one[n].any() for n in one if "lora_B" in n)
    with pytest.raises(Exception, match="neither a lora_A nor a lora_B"):
        seeded_lora_init({"q.magnitude": torch.ones(2)}, 0)


def test_each_seed_draws_its_own_training_and_heldout_samples(tmp_path: Path) -> None:
    """Training draws and held-out draws depend on the training seed, not on the judge (the
    judges of a seed share their base round and are compared on the same draws); held-out
    draws are the same at every epoch; the single-seed layout keeps `heldout|<task>`."""
    from judgelab.rollouts.generate import sample_seed

    runs = [
        RewardRun("a", TokenJudge(), tmp_path / "a1", 1),
        RewardRun("b", TokenJudge(), tmp_path / "b1", 1),
        RewardRun("a", TokenJudge(), tmp_path / "a2", 2),
        RewardRun("a", TokenJudge(), tmp_path / "a", None),  # train.seed = 1
    ]
    t = trainer(runs, tmp_path / "c", {})
    assert len(set(t.adapter.values())) == 4
    n_train = SETTINGS.groups_per_epoch
    plans = {r.key: t.requests(r, epoch=1) for r in runs}
    train = {k: [q.seeds for q in p[:n_train]] for k, p in plans.items()}
    held = {k: [q.seeds for q in p[n_train:]] for k, p in plans.items()}
    assert train["a/seed-1"] == train["b/seed-1"] == train["a"]  # the seed, not the judge
    assert train["a/seed-2"] != train["a/seed-1"]
    assert held["a/seed-1"] == held["b/seed-1"]  # the seed, not the judge
    assert len({tuple(held[k]) for k in ("a/seed-1", "a/seed-2", "a")}) == 3
    assert len(held["a"]) == 2 and held["a"][0] == tuple(
        sample_seed(SETTINGS.heldout.seed, "heldout|HumanEval/100", i) for i in range(3)
    )
    assert [q.seeds for q in t.requests(runs[2], epoch=0)[n_train:]] == held["a/seed-2"]
    with pytest.raises(ConfigError, match=r"distinct \(judge, seed\) runs"):
        trainer([runs[0], RewardRun("a", TokenJudge(), tmp_path / "x", 1)], tmp_path / "c", {})


# ------------------------------------------------------------------ lockstep and resume


def test_lockstep_over_seeds_starts_each_seed_from_its_own_adapter(tmp_path: Path) -> None:
    judges = {(j, s): TokenJudge() for j in ("a", "b") for s in (1, 2)}
    log: dict = {}
    histories = trainer(seeded_runs(tmp_path / "o", judges), tmp_path / "c", log).run()
    assert sorted(histories) == ["a/seed-1", "a/seed-2", "b/seed-1", "b/seed-2"]
    # every fresh seeded adapter re-initialised from its seed, in run order
    assert log["init"] == [("judge_0", 1), ("judge_1", 2), ("judge_2", 1), ("judge_3", 2)]
    for key, rows in histories.items():
        judge, _, seed = key.partition("/seed-")
        assert [r["epoch"] for r in rows] == [0, 1, 2]
        assert {r["judge"] for r in rows} == {judge}  # the tables name the judge, not the run
        ckpt = latest_checkpoint(tmp_path / "o" / judge / f"seed-{seed}" / "checkpoints")
        assert ckpt is not None and ckpt.done and ckpt.steps == 2
    policy_0 = {k: rows[0]["adapter"] for k, rows in histories.items()}
    assert policy_0["a/seed-1"] == policy_0["b/seed-1"] != policy_0["a/seed-2"]
    # base policy: the judges of a seed share its held-out draws; each seed draws its own
    draws = {k: [s["draw_seed"] for s in rows[0]["records"] if s["split"] == "heldout"]
             for k, rows in histories.items()}  # fmt: skip
    assert draws["a/seed-1"] == draws["b/seed-1"] and draws["a/seed-2"] == draws["b/seed-2"]
    assert not set(draws["a/seed-1"]) & set(draws["a/seed-2"])
    assert (
        histories["a/seed-1"][0]["heldout_pass_rate"]
        == histories["b/seed-1"][0]["heldout_pass_rate"]
    )
    assert sum(r["loss"] is not None for rows in histories.values() for r in rows) >= 1


def test_a_crash_resumes_each_judge_and_seed_where_it_stopped(tmp_path: Path) -> None:
    """b/seed-2 crashes in epoch 1 (its 5th judge call: 4 training samples per epoch), after
    the other runs saved epoch 1. The rerun redoes only what was lost and ends as the run that was
    never interrupted."""
    keys = [(j, s) for j in ("a", "b") for s in (1, 2)]
    reference = trainer(
        seeded_runs(tmp_path / "ref", {k: TokenJudge() for k in keys}), tmp_path / "cr", {}
    ).run()
    crashing = {k: TokenJudge(fail_on_call=5 if k == ("b", 2) else None) for k in keys}
    with pytest.raises(RuntimeError, match="simulated crash"):
        trainer(seeded_runs(tmp_path / "run", crashing), tmp_path / "cc", {}).run()
    steps = {
        k: latest_checkpoint(tmp_path / "run" / k[0] / f"seed-{k[1]}" / "checkpoints") for k in keys
    }
    assert {k: c.steps for k, c in steps.items() if c} == {
        ("a", 1): 2, ("a", 2): 2, ("b", 1): 2, ("b", 2): 1,
    }  # fmt: skip
    again = {k: TokenJudge() for k in keys}
    log: dict = {}
    resumed = trainer(seeded_runs(tmp_path / "run", again), tmp_path / "cc", log).run()
    assert log.get("init") is None  # every adapter came from its checkpoint
    assert again[("b", 2)].calls == 2 * 4 and again[("a", 1)].calls == 4  # epochs 1-2; 2
    for key, rows in reference.items():
        assert [r["epoch"] for r in resumed[key]] == [0, 1, 2]
        for got, want in zip(resumed[key], rows, strict=True):
            assert got["adapter"] == want["adapter"]
            assert got["reward_mean"] == want["reward_mean"]
            assert got["heldout_pass_rate"] == want["heldout_pass_rate"]
            assert got["loss"] == (None if want["loss"] is None else pytest.approx(want["loss"]))


def test_without_seeds_nothing_is_reinitialised(tmp_path: Path) -> None:
    log: dict = {}
    runs = [RewardRun(j, TokenJudge(), tmp_path / j) for j in ("a", "b")]
    histories = trainer(runs, tmp_path / "c", log).run()
    assert sorted(histories) == ["a", "b"] and "init" not in log
    assert histories["a"][0]["adapter"] == histories["b"][0]["adapter"]
    assert latest_checkpoint(tmp_path / "a" / "checkpoints") is not None
