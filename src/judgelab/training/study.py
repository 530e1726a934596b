"""The training-effect study: every arm (a judge, a planted judge, the placebo) trained from
the same base on the same groups, and the effect of each on a fixed bank
(`training.effect`). Only the reward differs between arms.

For each seed s:
1. the base policy draws `study.groups` training groups of `train.k` samples (seeds from s),
   once: every arm trains on these very samples; the tests and every arm score them once;
2. for each arm: the adapter is re-initialised from s (`Policy.init_adapter`: LoRA's A
   from s, B = 0, so the policy is the base model), a fresh AdamW, then `study.steps` GRPO
   steps (`grpo.grpo_step`) on the arm's advantages of those groups; then the bank's
   length-normalised log-probabilities under the trained adapter.

Steps after the first reuse the seed's groups (PPO-style epochs on one batch: the importance
ratio then differs from 1 and ART's clip applies), so that every arm sees the same samples;
a study of on-policy steps would draw each arm's later groups from its own policy, and arms
would no longer be paired. The bank is drawn once from the base policy (`study.bank_seed`)
and its log-probabilities under the base model computed once (the adapter disabled).

That is `study.method: steps`. With `first-order` (the default), step 2 is replaced by
`training.first_order`: per seed, each sample's s_ib = ⟨∇ℓ_i, ∇F_b⟩ per contrast bank task b
at the seed's fresh adapter (one backward over the bank, split by bank task; one forward and
backward per sample; cached), s_i = Σ_b s_ib / T, and per arm the effect of one plain-SGD GRPO
step to first order, η ΣN / ΣD over the seed's groups, with the per-task terms (N, D, and N_b
per bank task) in `StudyResult.terms` for the CIs, which resample the training tasks and the
bank tasks (`analysis.prediction.pooled_effects`).

`run_study` returns the raw figures: per (arm, seed) the effect, and per (arm, seed, task,
candidate) the reward and the test verdict, from which `analysis.prediction` computes each
arm's audit figures and how well they predict the effect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from judgelab.advantage import group_advantages, has_spread
from judgelab.cache import JsonCache
from judgelab.config import Settings, TrainSettings
from judgelab.config.evaluators import ExecutionSettings, PlantedSettings
from judgelab.config.training import StudySettings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import Evaluator
from judgelab.scoring import GroupCall, ScoredGroup, Scorer, score_serially
from judgelab.training.draws import Drawn, PolicyDraws, TableDraws, drawn_digest, fill_logprobs
from judgelab.training.effect import Bank, BankItem, bank_logprobs, effect
from judgelab.training.first_order import bank_task_gradients, group_terms, norm, sample_slopes
from judgelab.training.grpo import Trajectory, grpo_step
from judgelab.training.policy import Policy, Sample
from judgelab.verdicts import Task

log = logging.getLogger(__name__)

STUDY_RUN = "study"  # the run id of the study's calls

# The study computes in float32 whatever `train.dtype` says. Its effects are differences of
# mean log-probabilities of order 1e-7, and its first-order slopes must resolve a fresh
# adapter's LoRA output beside the base model's: bfloat16's 8-bit mantissa loses both. On
# CUDA at Qwen2.5-Coder-0.5B's shape, bfloat16 slopes correlated 0.05 with the exact ones and
# float32's 0.999997 (bench/first_order_precision.py, docs/BENCHMARKS.md).
STUDY_DTYPE = "float32"


# The slopes' kind, in their cache key: per contrast bank task by autograd (a key without it
# held whole-bank slopes by central differences, never to be read as per-bank ones).
SLOPES = "per-bank-autograd"


@dataclass(frozen=True)
class BankSlopes:
    """A seed's slopes: `values[group][sample][b]` = s_ib = ⟨∇ℓ_i, ∇F_b⟩ for the contrast
    bank tasks `banks` (in the bank's order)."""

    banks: list[str]
    values: list[list[list[float]]]

    def whole(self) -> list[list[float]]:
        """s_i = ⟨∇ℓ_i, ∇F⟩ = Σ_b s_ib / T per group (0 without a contrast task)."""
        t = len(self.banks)
        return [[sum(s) / t if t else 0.0 for s in group] for group in self.values]


def study_dtype(train: TrainSettings) -> str:
    """The dtype the study runs in (`STUDY_DTYPE`); a `train.dtype` of bfloat16, which the
    training stage keeps, is named in a warning rather than followed."""
    if train.dtype == "bfloat16":
        log.warning(
            "study: runs in %s; train.dtype bfloat16 applies to the training stage only "
            "(the study's effects are below bfloat16's resolution)",
            STUDY_DTYPE,
        )
    return STUDY_DTYPE


@dataclass(frozen=True)
class Arm:
    """One arm of the study: a name and the evaluator whose rewards it trains on."""

    name: str
    judge: Evaluator


@dataclass
class StudyResult:
    effects: list[dict] = field(default_factory=list)  # one per (arm, seed)
    rewards: list[dict] = field(default_factory=list)  # one per (arm, seed, candidate)
    terms: list[dict] = field(default_factory=list)  # first-order: one per (arm, seed, task)
    slopes: list[dict] = field(default_factory=list)  # first-order: one per (seed, candidate)
    bank: dict[str, int] = field(default_factory=dict)
    bank_tasks: list[str] = field(default_factory=list)  # in the bank's order
    seconds: dict[str, float] = field(default_factory=dict)


def _ok(results: Sequence[ScoredGroup | Exception]) -> list[ScoredGroup]:
    for r in results:
        if isinstance(r, Exception):
            raise r
    return list(results)  # type: ignore[arg-type]


def _passed(row: dict) -> bool | None:
    return None if row["score"] is None else row["score"] >= 1.0


def _reward_rows(
    arm: str, seed: int, drawn: Sequence[Drawn], judged: Sequence[ScoredGroup],
    tests: Sequence[ScoredGroup],
) -> list[dict]:  # fmt: skip
    """One arm's reward and the tests' verdict per candidate of a seed's groups."""
    return [
        {"arm": arm, "seed": seed, "task_id": c.task_id, "candidate_id": c.candidate_id,
         "reward": r["score"] if r["status"] == "scored" else None, "passed": _passed(v)}
        for d, scored, truth in zip(drawn, judged, tests, strict=True)
        for c, r, v in zip(d.candidates, scored.rows, truth.rows, strict=True)
    ]  # fmt: skip


def _bank_key(bank: Bank) -> list[object]:
    return [[i.task_id, i.prompt_ids, i.completion_ids, i.passed] for i in bank.items]


def trajectories(
    prompts: Sequence[list[int]],
    groups: Sequence[Sequence[Sample]],
    judged: Sequence[ScoredGroup],
) -> list[Trajectory]:
    """An arm's GRPO batch, as the training loop builds it: each group with reward spread,
    its scored samples with a non-zero advantage."""
    out: list[Trajectory] = []
    for g, (prompt, samples, scored) in enumerate(zip(prompts, groups, judged, strict=True)):
        kept = [(s, r["score"]) for s, r in zip(samples, scored.rows, strict=True)
                if r["status"] == "scored"]  # fmt: skip
        rewards = [r for _, r in kept]
        if not has_spread(rewards):
            continue
        for (s, _), adv in zip(kept, group_advantages(rewards), strict=True):
            if adv != 0.0:
                out.append(Trajectory(prompt, s.token_ids, s.logprobs, adv, g))
    return out


class Study:
    """Runs the study (module docstring) on one policy, with one adapter re-initialised per
    (arm, seed). `draws` says where the samples come from (`training.draws`); `results`, when
    given, keeps each (arm, seed)'s outcome under a key of everything it depends on (the
    policy, the GRPO settings, the seed, the arm's batch and the bank), so that a study cut
    short resumes at the next (arm, seed) and a repeated one trains nothing."""

    VERSION = 1  # bump when an (arm, seed)'s outcome would change for the same key

    def __init__(
        self,
        arms: Sequence[Arm],
        executor: Evaluator,
        draws: PolicyDraws | TableDraws,
        train: TrainSettings,
        study: StudySettings,
        scorer: Scorer = score_serially,
        results: JsonCache | None = None,
    ) -> None:
        names = [a.name for a in arms]
        if len(set(names)) != len(names) or not names:
            raise ConfigError(f"study: need distinct arms, got {names}")
        self.arms = list(arms)
        self.executor = executor
        self.draws = draws
        self.train = train
        self.study = study
        self.scorer = scorer
        self.results = results

    def _tests(self, drawn: Sequence[Drawn]) -> list[ScoredGroup]:
        calls = [GroupCall(STUDY_RUN, self.executor, d.task, d.candidates) for d in drawn]
        return _ok(self.scorer(calls))

    def _passed(self, drawn: Sequence[Drawn]) -> list[list[bool | None]]:
        return [[_passed(r) for r in g.rows] for g in self._tests(drawn)]

    def bank(self, policy: Policy) -> Bank:
        """The bank with its tests' verdicts (a sample the sandbox could not test is left
        out)."""
        items = []
        for d, verdicts in self.draws.bank(policy, self._passed):
            prompt = policy.prompt_ids(d.messages)
            for s, passed in zip(d.samples, verdicts, strict=True):
                if passed is not None and s.token_ids:
                    items.append(BankItem(d.task.task_id, prompt, list(s.token_ids), passed))
        return Bank(items)

    def _key(self, policy: Policy, **what: object) -> dict:
        return {
            "study": self.VERSION,
            "policy": policy.zoo_name,
            "dtype": policy.dtype,
            "device": policy.device,
            **what,
        }

    def _before(self, policy: Policy, bank: Bank) -> list[float]:
        """The bank's log-probabilities under the base model (cached with `results`)."""
        key = self._key(policy, bank=_bank_key(bank))
        hit = self.results.get(key) if self.results is not None else None
        if hit is not None:
            return list(hit["before"])
        with policy.model.disable_adapter():
            before = bank_logprobs(policy.model, bank.items, policy.pad_id)
        if self.results is not None:
            self.results.put(key, {"before": before})
        return before

    def run(self, policy: Policy, progress: Callable[[str], None] | None = None) -> StudyResult:
        """Every (seed, arm): its steps and its effect on the bank (module docstring)."""
        say = progress or (lambda what: None)
        result = StudyResult()
        t0 = time.monotonic()
        bank = self.bank(policy)
        result.bank = bank.summary()
        result.bank_tasks = list(dict.fromkeys(i.task_id for i in bank.items))
        first_order = self.study.method == "first-order"
        before = [] if first_order else self._before(policy, bank)
        result.seconds["bank"] = time.monotonic() - t0
        say(f"bank: {result.bank}")
        if not bank.contrast_tasks:
            log.warning(
                "study: no bank task has both a passing and a failing sample: every effect is "
                "undefined (draw more bank samples or other tasks)"
            )
        if not first_order:
            result.seconds["train_and_bank"] = 0.0
            result.seconds["cached_arms"] = 0
        for index, seed in enumerate(self.study.seeds):
            drawn = self.draws.training(policy, index, seed)
            tests = self._tests(drawn)
            calls = [
                GroupCall(f"{STUDY_RUN}-{a.name}", a.judge, d.task, d.candidates)
                for a in self.arms
                for d in drawn
            ]
            judged = _ok(self.scorer(calls))
            prompts = [policy.prompt_ids(d.messages) for d in drawn]
            say(f"seed {seed}: {len(drawn)} groups, scored by {len(self.arms)} arms")
            n = len(drawn)
            slopes = (
                self._seed_slopes(policy, seed, drawn, prompts, bank, result)
                if first_order else BankSlopes([], [])
            )  # fmt: skip
            for a, arm in enumerate(self.arms):
                mine = judged[a * n : (a + 1) * n]
                result.rewards += _reward_rows(arm.name, seed, drawn, mine, tests)
                if first_order:
                    row, terms = self._first_order(drawn, mine, slopes)
                    result.terms += [{"arm": arm.name, "seed": seed, **t} for t in terms]
                else:
                    t1 = time.monotonic()
                    row, cached, drawn = self._outcome(
                        policy, seed, drawn, prompts, mine, bank, before
                    )
                    result.seconds["cached_arms"] += cached
                    result.seconds["train_and_bank"] += time.monotonic() - t1
                result.effects.append({"arm": arm.name, "seed": seed, **row})
                say(f"seed {seed}, {arm.name}: {row}")
        result.seconds["total"] = time.monotonic() - t0
        return result

    def _seed_slopes(
        self,
        policy: Policy,
        seed: int,
        drawn: list[Drawn],
        prompts: list[list[int]],
        bank: Bank,
        result: StudyResult,
    ) -> BankSlopes:
        """`_slopes`, recorded in `result` (one row per candidate: s_i and each s_ib, and
        their seconds)."""
        t0 = time.monotonic()
        slopes, computed = self._slopes(policy, seed, drawn, prompts, bank)
        result.seconds["slopes_computed"] = result.seconds.get("slopes_computed", 0.0) + computed
        result.slopes += [
            {"seed": seed, "task_id": c.task_id, "candidate_id": c.candidate_id,
             "slope": whole, "slope_bank": dict(zip(slopes.banks, each, strict=True))}
            for d, group, per in zip(drawn, slopes.whole(), slopes.values, strict=True)
            for c, whole, each in zip(d.candidates, group, per, strict=True)
        ]  # fmt: skip
        result.seconds["slopes"] = result.seconds.get("slopes", 0.0) + time.monotonic() - t0
        return slopes

    def _slopes(
        self, policy: Policy, seed: int, drawn: list[Drawn], prompts: list[list[int]], bank: Bank
    ) -> tuple[BankSlopes, float]:
        """Each sample's s_ib = ⟨∇ℓ_i, ∇F_b⟩ per contrast bank task b (`training.first_order`:
        the bank's T gradients, then one forward and backward per sample) at the seed's fresh
        adapter, per group, and the seconds their computation took (when cached: the run that
        computed them); cached with `results` under everything they depend on. The key names
        the per-bank slopes (`SLOPES`): a cached whole-bank slope is never read as one."""
        key = self._key(
            policy,
            method="first-order",
            slopes=SLOPES,
            lora=self.train.lora.model_dump(mode="json"),
            temperature=self.train.temperature,
            seed=seed,
            groups=drawn_digest(drawn),
            bank=_bank_key(bank),
        )
        hit = self.results.get(key) if self.results is not None else None
        if hit is not None:
            values = [[list(s) for s in g] for g in hit["slopes_bank"]]
            return BankSlopes(list(hit["banks"]), values), float(hit.get("seconds", 0.0))
        t0 = time.monotonic()
        policy.init_adapter(policy.active, seed)
        params = policy.trainable()
        statistics, grads = bank_task_gradients(policy.model, bank, policy.pad_id, params)
        banks = list(grads)
        items = [BankItem(d.task.task_id, prompt, list(s.token_ids), True)
                 for d, prompt in zip(drawn, prompts, strict=True) for s in d.samples]  # fmt: skip
        flat = sample_slopes(policy.model, items, policy.pad_id, params,
                             [grads[b] for b in banks], self.train.temperature)  # fmt: skip
        out, at = [], 0
        for d in drawn:
            out.append(flat[at : at + len(d.samples)])
            at += len(d.samples)
        seconds = round(time.monotonic() - t0, 1)
        if self.results is not None:
            self.results.put(key, {"banks": banks, "slopes_bank": out,
                                   "bank_statistics": statistics,
                                   "grad_norms": {b: norm(g) for b, g in grads.items()},
                                   "seconds": seconds})  # fmt: skip
        return BankSlopes(banks, out), seconds

    def _first_order(
        self, drawn: list[Drawn], judged: list[ScoredGroup], slopes: BankSlopes
    ) -> tuple[dict, list[dict]]:
        """One arm's first-order effect at one seed (η ΣN / ΣD over the seed's groups) and its
        per-task terms: N, D and N_b per contrast bank task b (N = Σ_b N_b / T); and, per
        bank task, the effect on F_b alone (`bank_effects`: η Σ N_b / ΣD; their mean is the
        effect)."""
        terms = []
        for d, scored, group, whole in zip(drawn, judged, slopes.values, slopes.whole(),
                                           strict=True):  # fmt: skip
            rewards = [r["score"] if r["status"] == "scored" else None for r in scored.rows]
            n, den = group_terms(whole, rewards)
            per = {b: group_terms([s[j] for s in group], rewards)[0]
                   for j, b in enumerate(slopes.banks)}  # fmt: skip
            terms.append({"task_id": d.task.task_id, "n": n, "d": den, "n_bank": per})
        total = sum(t["d"] for t in terms)
        lr = self.train.learning_rate

        def ratio(parts: Sequence[float]) -> float:
            return lr * sum(parts) / total if total > 0 else 0.0

        row = {
            "effect": ratio([t["n"] for t in terms]),
            "method": "first-order",
            "stepped_groups": sum(t["d"] > 0 for t in terms),
            "groups": len(terms),
            "bank_effects": {b: ratio([t["n_bank"][b] for t in terms]) for b in slopes.banks},
        }
        return row, terms

    def _outcome(
        self,
        policy: Policy,
        seed: int,
        drawn: list[Drawn],
        prompts: list[list[int]],
        judged: list[ScoredGroup],
        bank: Bank,
        before: list[float],
    ) -> tuple[dict, bool, list[Drawn]]:
        """One arm's outcome at one seed from the results cache, or trained (`_arm`) and
        cached; whether it was cached; and `drawn`, with the samples' log-probabilities once
        a table's samples needed them (`fill_logprobs`)."""
        batch = trajectories(prompts, [d.samples for d in drawn], judged)
        key = self._key(
            policy,
            lora=self.train.lora.model_dump(mode="json"),
            learning_rate=self.train.learning_rate,
            loss=self.train.loss.model_dump(mode="json"),
            max_grad_norm=self.train.max_grad_norm,
            temperature=self.train.temperature,
            steps=self.study.steps,
            seed=seed,
            batch=[[t.group, t.completion_ids, t.advantage] for t in batch],
            groups=drawn_digest(drawn),
            bank=_bank_key(bank),
        )
        row = self.results.get(key) if self.results is not None else None
        if row is not None:
            return row, True, drawn
        if batch and not all(t.logprobs for t in batch):
            policy.init_adapter(policy.active, seed)  # the base policy
            drawn = fill_logprobs(policy, drawn, self.train.temperature)
            batch = trajectories(prompts, [d.samples for d in drawn], judged)
        row = self._arm(policy, seed, batch, bank, before)
        if self.results is not None:
            self.results.put(key, row)
        return row, False, drawn

    def _arm(
        self, policy: Policy, seed: int, batch: list[Trajectory], bank: Bank, before: list[float]
    ) -> dict:
        """One arm at one seed: from the seed's fresh adapter, `study.steps` GRPO steps on
        `batch` (none when no sample has an advantage), then the effect on the bank."""
        import torch

        t0 = time.monotonic()
        policy.init_adapter(policy.active, seed)
        optimizer = torch.optim.AdamW(
            policy.trainable(), lr=self.train.learning_rate, weight_decay=0.0
        )
        losses = [
            grpo_step(policy, optimizer, batch, self.train.loss, self.train.max_grad_norm,
                      self.train.temperature, rows_per_forward=self.train.k).loss
            for _ in range(self.study.steps if batch else 0)
        ]  # fmt: skip
        # no step: the adapter is the base model (LoRA's B = 0 adds exact zeros), so the bank's
        # log-probabilities are `before`'s and the forward is skipped
        after = bank_logprobs(policy.model, bank.items, policy.pad_id) if losses else before
        value, n_tasks = effect(before, after, bank)
        return {
            "effect": value,
            "n_bank_tasks": n_tasks,
            "trajectories": len(batch),
            "steps": len(losses),
            "loss_first": losses[0] if losses else None,
            "seconds": round(time.monotonic() - t0, 1),
        }


def study_tasks(path: Path) -> list[Task]:
    """The training tasks of a study: the tasks table (the tasks stage's output), validated."""
    from judgelab.schemas import validate_file
    from judgelab.tasks import tasks_from_frame

    return tasks_from_frame(validate_file(path, "tasks"))


def planted_arms(study: StudySettings, tests: ExecutionSettings) -> list[PlantedSettings]:
    """The planted arms' settings: one per flip rate (`flip-<rate>`) and the placebo (the
    tests' verdicts shuffled within the group); `tests`: how the tests run."""
    specs = [PlantedSettings(name=f"flip-{f:g}", flip=f, tests=tests) for f in study.flips]
    if study.placebo:
        specs.append(PlantedSettings(name="placebo", shuffle=True, tests=tests))
    return specs


def run_study(
    settings: Settings,
    study: StudySettings,
    tasks: Sequence[Task],
    progress: Callable[[str], None] | None = None,
    scorer: Scorer = score_serially,
) -> StudyResult:
    """The study from settings: `study.arms` (judges of scores.evaluators, served as the
    training stage serves them) and the planted arms, `train.*`'s GRPO settings and policy;
    the samples drawn from the policy (the bank from `study.bank_ids` or train.heldout's
    pool) or read from `study.rollouts` (`training.draws`). Each (arm, seed)'s outcome is
    kept in the cache's `study` namespace."""
    from judgelab.config import EmbeddedModel
    from judgelab.evaluators.planted import PlantedJudge, SharedTests
    from judgelab.evaluators.registry import build_evaluator
    from judgelab.models.server import serve
    from judgelab.paths import cache_dir, project_root
    from judgelab.tasks.registry import tasks_by_id
    from judgelab.training.run import heldout_ids

    train = settings.train
    runner = settings.test_runner()
    specs = [settings.evaluator(name) for name in study.arms] + planted_arms(study, runner)
    if not specs:
        raise ConfigError("study: no arm (give --arm, --flips or --placebo)")
    policy_model = settings.model(train.policy)
    if not isinstance(policy_model, EmbeddedModel):
        raise ConfigError(f"train.policy: {train.policy} is not an embedded model")
    draws: PolicyDraws | TableDraws
    if study.rollouts is not None:
        from judgelab.schemas import validate_file

        frame = validate_file(project_root() / study.rollouts, "rollouts")
        draws = TableDraws(frame, tasks, study, train.policy)
    else:
        bank_ids = list(study.bank_ids) or heldout_ids(settings)
        bank = tasks_by_id(settings.tasks, project_root(), bank_ids, "study bank")
        samples = JsonCache(cache_dir(), "training-samples")
        draws = PolicyDraws(tasks, bank, study, train, settings.rollouts, samples)
    called = sorted({s.judge_model for s in specs if s.judge_model is not None})
    tests = SharedTests(runner)  # the sandbox runs each group once for all planted arms
    with serve(settings, called) as endpoints:
        judge_cache = JsonCache(cache_dir(), "judge")
        arms = [
            Arm(s.name, PlantedJudge(s, tests) if isinstance(s, PlantedSettings)
                else build_evaluator(s, endpoints, judge_cache))
            for s in specs
        ]  # fmt: skip
        plan = Study(arms, tests, draws, train, study, scorer, JsonCache(cache_dir(), "study"))
        policy = Policy(policy_model.zoo, train.lora, train.device, dtype=study_dtype(train))
        return plan.run(policy, progress)
