"""Training signals: within-group alignment and its alarm, no duplicate groups,
forged runs counted, resumes that notice changed settings. The loop runs on the stand-in
policy of test_training_seeds (our bookkeeping, not a model's behaviour)."""

from __future__ import annotations

import math
from itertools import permutations
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from judgelab.advantage import group_advantages
from judgelab.cache import JsonCache
from judgelab.config import HumanEvalSettings, LoraSettings, RolloutSettings, TrainSettings
from judgelab.config.evaluators import FormatSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.tasks.humaneval import load_humaneval
from judgelab.tasks.testing import FORGED
from judgelab.training import alarm
from judgelab.training import alignment as al
from judgelab.training.checkpoint import latest_checkpoint
from judgelab.training.history import history_frame
from judgelab.training.plan import train_row
from judgelab.training.round import RewardRun
from judgelab.training.trainer import Trainer
from judgelab.verdicts import Candidate, Task, Verdict
from tests.unit.test_training_seeds import SETTINGS, StandInPolicy, TokenJudge, token

ROLLOUT = RolloutSettings()


class ForgingTests(PointwiseEvaluator):
    """The 'tests': an even token passes; token 7 'forged a pass' (scored 0, outcome forged)."""

    protocol = "execution"

    def __init__(self) -> None:
        super().__init__(FormatSettings(name="execution"))
        self.forged: set[str] = set()

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        if token(candidate) == 7:
            self.forged.add(candidate.candidate_id)
            reason = FORGED + "left before the tests finished"
            return Verdict.scored(0.0, reason=reason, outcome="forged")
        passed = token(candidate) % 2 == 0
        return Verdict.scored(float(passed), outcome="passed" if passed else "tests_failed")


def make_trainer(
    runs: list[RewardRun],
    cache: Path,
    settings: TrainSettings,
    n_tasks: int = 2,
    rollout: RolloutSettings = ROLLOUT,
    policy: type = StandInPolicy,
) -> Trainer:
    return Trainer(
        runs=runs,
        settings=settings,
        rollout=rollout,
        tasks=load_humaneval(HumanEvalSettings(offset=0, limit=n_tasks)),
        heldout=load_humaneval(HumanEvalSettings(offset=100, limit=2)),
        cache=JsonCache(cache, "samples"),
        executor=ForgingTests(),
        policy_factory=lambda adapters: policy(adapters, {}),
    )


# ------------------------------------------------------------------ duplicate groups


def test_no_identical_training_requests_within_an_epoch(tmp_path: Path) -> None:
    """groups_per_epoch 5 over 2 tasks: each task comes back as a group of its own (fresh
    seeds), while the first round draws exactly what it drew before repeats existed."""
    settings = SETTINGS.model_copy(update={"groups_per_epoch": 5})
    t = make_trainer([RewardRun("a", TokenJudge(), tmp_path / "a")], tmp_path / "c", settings)
    for epoch in range(3):
        train = t.requests(t.runs[0], epoch)[:5]
        keys = [(str(q.messages), q.seeds) for q in train]
        assert len(set(keys)) == 5, f"epoch {epoch}: identical training requests"
        assert len({s for q in train for s in q.seeds}) == 5 * settings.k
    assert train_row(3, 1, 2, "HumanEval/1") == "train|3|HumanEval/1"  # first round: as before
    assert train_row(3, 3, 2, "HumanEval/1") == "train|3|HumanEval/1|repeat-1"
    history = t.run()["a"]
    assert [r["groups"] for r in history] == [5, 5, 5]


# ------------------------------------------------------------------ alignment, by hand


def test_alignment_by_hand_and_spearman_against_scipy() -> None:
    # the committed RULER epoch: rewards [.9, .5, .5, .9] against tests [0, 1, 1, 0]
    adv = group_advantages([0.9, 0.5, 0.5, 0.9])
    g = al.group_alignment(adv, [0.0, 1.0, 1.0, 0.0])
    assert al.epoch_alignment([g], 5)["alignment"] == pytest.approx(-1.0)  # all of it wrong
    # a mixed group: A = (r - .5)/std; 2 * (A_1 + A_3) / sum |A| by hand
    rewards, passed = [0.2, 0.8, 0.6, 0.4], [0.0, 1.0, 0.0, 1.0]
    a = group_advantages(rewards)
    g2 = al.group_alignment(a, passed)
    want = 2 * (a[1] + a[3]) / sum(abs(x) for x in a)
    assert al.epoch_alignment([g2], 5)["alignment"] == pytest.approx(want)
    assert want == pytest.approx(2 * (3 - 1) / 8)  # A ~ (-3, 3, 1, -1): 0.5
    # pooled over groups: one ratio of sums
    pooled = al.epoch_alignment([g, g2], 5)["alignment"]
    assert pooled == pytest.approx(
        2 * (g.push_to_passing + g2.push_to_passing) / (g.push + g2.push)
    )
    # an untested candidate (None) leaves the figure
    g3 = al.group_alignment(a, [0.0, 1.0, None, 1.0])
    assert g3.passed == (0.0, 1.0, 1.0) and len(g3.advantages) == 3
    rng = np.random.default_rng(3)
    for _ in range(20):
        r = np.round(rng.random(6), 1).tolist()
        p = (rng.random(6) < 0.5).astype(float).tolist()
        got = al.spearman(r, p)
        if got is None:
            assert len(set(r)) < 2 or len(set(p)) < 2
            continue
        assert got == pytest.approx(spearmanr(r, p).statistic)


def test_cis_need_min_ci_groups_and_cover_the_pooled_value() -> None:
    rng = np.random.default_rng(0)
    groups = []
    for _ in range(12):
        r = rng.random(4).tolist()
        groups.append(al.group_alignment(group_advantages(r), [1.0, 0.0, 1.0, 0.0]))
    few = al.epoch_alignment(groups[:4], 5)
    assert few["alignment_ci_low"] is None and few["alignment_groups"] == 4
    many = al.epoch_alignment(groups, 5)
    assert many["alignment_ci_low"] <= many["alignment"] <= many["alignment_ci_high"]
    assert many["rank_corr_groups"] == 12
    assert many["rank_corr_ci_low"] <= many["rank_corr"] <= many["rank_corr_ci_high"]


def test_permutation_p_and_e_value_by_hand() -> None:
    """One fully anti-aligned group of 4 (2 pass, 2 fail): of the 6 distinct assignments
    of its advantages, one is as bad: p = 1/6. Its e-value at lambda, by hand: the null of
    t = -sum(A p)/sum|A| is 1/2 w.p. 1/6, -1/2 w.p. 1/6, 0 w.p. 4/6."""
    g = al.group_alignment([1.0, 1.0, -1.0, -1.0], [0.0, 0.0, 1.0, 1.0])
    p = al.permutation_p([g], np.random.default_rng(0))
    assert p == pytest.approx(1 / 6, abs=0.03)
    log_e = al.group_log_e(g, np.random.default_rng(0))
    for lam, got in zip(al.LAMBDAS, log_e, strict=True):
        mgf = (math.exp(lam / 2) + math.exp(-lam / 2) + 4) / 6
        assert got == pytest.approx(lam / 2 - math.log(mgf))
    # exact enumeration agrees with the definition (mean over all 4! orders)
    null = [-sum(a * q for a, q in zip(perm, g.passed, strict=True)) / 4
            for perm in permutations(g.advantages)]  # fmt: skip
    assert sorted(set(null)) == [-0.5, 0.0, 0.5]
    # a group the tests do not split carries no evidence either way
    flat = al.group_alignment([1.0, -1.0], [1.0, 1.0])
    assert al.group_log_e(flat, np.random.default_rng(0)) == [0.0] * len(al.LAMBDAS)
    e = al.running_evalue([log_e, None, log_e])
    assert e[1] == e[0] and e[2] > e[0]
    assert alarm.alarm_flags([1.0, 25.0, 3.0], 0.05) == [False, True, True]  # stays raised


def test_false_alarm_rate_with_the_policy_held_fixed() -> None:
    """A small version of docs/TRAINING.md's simulation (k = 4, 1 group an epoch, 10
    epochs): a blind judge sets the alarm off at most about alpha of the time, while the old
    adjacent-epoch rule marks most runs; a judge that favours failing code sets it off."""
    blind = al.simulate_false_alarms(300, 10, 1, 4, 0.05, 0.1, seed=1)
    assert blind["alarm_rate"] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / 300)
    assert blind["adjacent_rate"] > 0.4
    anti = al.simulate_false_alarms(100, 10, 1, 4, 0.05, 0.1, judge="anti", seed=2)
    assert anti["alarm_rate"] > 0.7


# ------------------------------------------------------------------ the loop's figures


def test_history_alignment_is_the_samples_alignment_and_forged_runs_count(tmp_path: Path) -> None:
    """TokenJudge pays token/7; the tests pass even tokens and call token 7 forged. The loop's
    per-epoch alignment equals the one the analysis forms from the samples table alone, and
    every forged verdict is counted in its epoch's row."""
    from judgelab.analysis.training import trained_groups
    from judgelab.training.history import samples_frame

    settings = SETTINGS.model_copy(update={"groups_per_epoch": 3, "epochs": 3})
    tests = ForgingTests()
    t = make_trainer([RewardRun("a", TokenJudge(), tmp_path / "a")], tmp_path / "c", settings)
    t.executor = tests
    history = t.run()["a"]
    by_epoch = trained_groups(samples_frame(history))
    assert sum(len(g) for g in by_epoch.values()) > 0
    for row in history:
        groups = by_epoch.get(row["epoch"], [])
        want = al.epoch_alignment(groups, t.min_ci_groups)
        assert row["alignment"] == pytest.approx(want["alignment"])
        assert row["alignment_groups"] == len(groups) == row["groups"] - row["groups_skipped"]
        assert row["forged"] == sum(r["candidate_id"] in tests.forged for r in row["records"])
    assert sum(row["forged"] for row in history) > 0
    frame = history_frame(history, 0.1, 0.05)
    assert frame["evalue"].to_list() == pytest.approx(
        al.running_evalue([r["alignment_log_e"] for r in history[:-1]] + [None])
    )


def test_the_alarm_counts_only_the_groups_grpo_stepped_on(tmp_path: Path) -> None:
    """The last row (policy_E) is scored and never trained on: its groups stay out of the
    e-process and of the run's alignment, while its own alignment columns remain (an
    evaluation of the final policy). Evidence planted in the last row raises nothing; the
    same evidence in a stepped row fires the alarm."""
    from judgelab.analysis.training import judge_training_metrics
    from judgelab.config import AnalysisSettings
    from judgelab.training.history import samples_frame

    settings = SETTINGS.model_copy(update={"groups_per_epoch": 3, "epochs": 2})
    t = make_trainer([RewardRun("a", TokenJudge(), tmp_path / "a")], tmp_path / "c", settings)
    history = t.run()["a"]
    final = history[-1]
    assert final["loss"] is None and final["alignment_groups"] > 0  # scored, with spread
    damning = [math.log(1e6)] * len(al.LAMBDAS)
    late = [dict(r) for r in history]
    late[-1]["alignment_log_e"] = damning
    frame = history_frame(late, 0.1, 0.05)
    assert frame["evalue"][-1] == pytest.approx(frame["evalue"][-2])
    assert not frame["reward_hacking"].any()
    assert frame["alignment_groups"][-1] == final["alignment_groups"]  # kept, as evaluation
    early = [dict(r) for r in history]
    early[0]["alignment_log_e"] = damning
    assert history_frame(early, 0.1, 0.05)["reward_hacking"].to_list() == [True] * 3
    # the analysis, from the tables alone, pools the same groups
    m = judge_training_metrics(
        history_frame(history, 0.1, 0.05), samples_frame(history), AnalysisSettings()
    )
    stepped = sum(r["alignment_groups"] for r in history[:-1])
    assert m["alignment"]["alignment_groups"] == m["alignment"]["alarm"]["n_groups"] == stepped
    assert stepped < sum(r["alignment_groups"] for r in history)


# ------------------------------------------------------------------ resume


def test_resume_refuses_changed_settings_and_continues_raised_epochs(tmp_path: Path) -> None:
    base = SETTINGS.model_copy(update={"epochs": 2})
    run = lambda settings, out="o": make_trainer(  # noqa: E731
        [RewardRun("a", TokenJudge(), tmp_path / out)], tmp_path / "c", settings
    ).run()["a"]
    first = run(base)
    assert latest_checkpoint(tmp_path / "o" / "checkpoints").settings is not None
    with pytest.raises(ConfigError) as err:
        run(base.model_copy(update={"learning_rate": 0.1}))
    assert "train.learning_rate: trained with 0.5, now 0.1" in str(err.value)
    assert "optimiser's state was built at the old rate" in str(err.value)
    with pytest.raises(ConfigError, match=r"train\.lora\.alpha: trained with 16, now 32"):
        run(base.model_copy(update={"lora": LoraSettings(alpha=32)}))
    with pytest.raises(ConfigError, match=r"already taken 2 steps, more than train\.epochs = 1"):
        run(base.model_copy(update={"epochs": 1}))
    # not only train.*: the prompt the policy sees, and the dtype `auto` resolved to
    prompt = RolloutSettings(system_prompt="Answer in French.")
    with pytest.raises(ConfigError, match=r"rollouts\.system_prompt \(the policy's prompt\)"):
        make_trainer([RewardRun("a", TokenJudge(), tmp_path / "o")], tmp_path / "c", base,
                     rollout=prompt).run()  # fmt: skip
    bf16 = type("Bf16Policy", (StandInPolicy,), {"dtype": "bfloat16"})
    with pytest.raises(ConfigError, match=r"train\.dtype, as resolved: trained with 'float32'"):
        make_trainer([RewardRun("a", TokenJudge(), tmp_path / "o")], tmp_path / "c",
                     base.model_copy(update={"epochs": 3}), policy=bf16).run()  # fmt: skip
    # analysis-only keys change nothing: the finished run is returned as it is
    assert run(base.model_copy(update={"alarm_alpha": 0.01})) == first
    # raising epochs continues from the last checkpoint: the run equals one trained to 3
    longer = run(base.model_copy(update={"epochs": 3}))
    straight = run(base.model_copy(update={"epochs": 3}), out="straight")
    assert [r["epoch"] for r in longer] == [0, 1, 2, 3]
    assert [r["adapter"] for r in longer] == [r["adapter"] for r in straight]
    assert [r["loss"] for r in longer] == pytest.approx([r["loss"] for r in straight])
    assert [r["adapter"] for r in longer[:2]] == [r["adapter"] for r in first[:2]]
    assert latest_checkpoint(tmp_path / "o" / "checkpoints").steps == 3


def test_a_checkpoint_loads_with_its_own_lora_settings(tmp_path: Path) -> None:
    """`checkpoint generate` builds the adapter from PEFT's adapter_config.json, not from
    today's train.lora (a changed alpha would load silently and rescale the adapter)."""
    import json

    from judgelab.training.policy import saved_lora

    assert saved_lora(tmp_path) is None  # no config: the caller falls back to train.lora
    (tmp_path / "adapter_config.json").write_text(
        json.dumps({"r": 4, "lora_alpha": 32, "lora_dropout": 0.0,
                    "target_modules": ["v_proj", "q_proj"], "peft_type": "LORA"})
    )  # fmt: skip
    assert saved_lora(tmp_path) == LoraSettings(r=4, alpha=32, target_modules=["q_proj", "v_proj"])


def test_tables_written_before_the_alarm_still_load(tmp_path: Path) -> None:
    """A history whose `reward_hacking` was the old adjacent-epoch rule: read back with that
    flag as `reward_pass_divergence`, the alarm and the new figures null (never measured)."""
    import polars as pl

    from judgelab.schemas import validate_file
    from tests.support.report_inputs import write_training_histories

    write_training_histories(tmp_path, ("a",))
    new = pl.read_parquet(tmp_path / "a" / "history.parquet")
    added = ["forged", "evalue", "reward_hacking"] + [c for c in new.columns if "align" in c
                                                      or "rank_corr" in c]  # fmt: skip
    old = new.drop(added).rename({"reward_pass_divergence": "reward_hacking"})
    old.write_parquet(tmp_path / "old.parquet")
    back = validate_file(tmp_path / "old.parquet", "history")
    assert back.columns == new.columns
    assert back["reward_pass_divergence"].to_list() == new["reward_pass_divergence"].to_list()
    assert back["reward_hacking"].null_count() == back["alignment"].null_count() == back.height
    samples = pl.read_parquet(tmp_path / "a" / "samples.parquet").drop("group")
    samples.write_parquet(tmp_path / "old_samples.parquet")
    assert validate_file(tmp_path / "old_samples.parquet", "training_samples")["group"].null_count()
