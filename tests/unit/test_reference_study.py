"""The committed reference study (`make reference-study`, reference/data/study) is what its
design and its tables say: the design is the Makefile's, the planted arms' rewards are the
tests' verdicts flipped as planted, each arm's first-order effect recomputes by hand from the
committed slopes and rewards (its own GRPO advantages, written out here), and every figure in
prediction.json recomputes from rewards.parquet and effects.json (no model runs here)."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats as scipy_stats

from judgelab.analysis.prediction import (
    UNSAVED,
    arm_audit,
    arm_figure_draws,
    effect_units,
    first_order_check,
    judges_vs_planted,
    pooled_effects,
    predictions,
)
from judgelab.analysis.stats import CIRule, clean_json
from judgelab.config import load_settings
from judgelab.report.prediction import STUDY_DIGITS

ROOT = Path(__file__).resolve().parents[2]
STUDY = ROOT / "reference" / "data" / "study"


def _design() -> dict[str, list[str]]:
    """The Makefile's REFERENCE_STUDY options, option -> values."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    found = re.search(r"^REFERENCE_STUDY = (.*)$", text, re.M)
    assert found is not None
    args = shlex.split(found.group(1))
    out: dict[str, list[str]] = {}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        out.setdefault(flag.lstrip("-"), []).append(value)
    return out


def _effects() -> dict:
    return json.loads((STUDY / "effects.json").read_text())


def test_the_committed_study_is_the_makefile_design() -> None:
    design, settings = _design(), _effects()["settings"]
    assert settings["method"] == design["method"][0] == "first-order"
    assert settings["arms"] == design["arm"]
    assert settings["flips"] == [float(f) for f in design["flips"][0].split(",")]
    assert settings["seeds"] == [int(s) for s in design["seeds"][0].split(",")]
    for key in ("groups", "bank-size"):
        assert settings[key.replace("-", "_")] == int(design[key][0]), key
    assert settings["rollouts"] == design["rollouts"][0] and settings["placebo"] is True


def test_the_planted_arms_rewards_are_the_tests_flipped_as_planted() -> None:
    rewards = (pl.read_parquet(STUDY / "rewards.parquet").filter(pl.col("passed").is_not_null())
               .unique(["arm", "candidate_id"]))  # the seeds share the groups  # fmt: skip
    truth = rewards.filter(pl.col("arm") == "flip-0")
    assert truth.height > 0 and (truth["reward"] == truth["passed"].cast(pl.Float64)).all()
    inverse = rewards.filter(pl.col("arm") == "flip-1")
    assert (inverse["reward"] == 1.0 - inverse["passed"].cast(pl.Float64)).all()
    for f in _effects()["settings"]["flips"]:
        if f in (0.0, 1.0):
            continue
        arm = rewards.filter(pl.col("arm") == f"flip-{f:g}")
        flipped = float((arm["reward"] != arm["passed"].cast(pl.Float64)).mean())  # type: ignore[arg-type]
        # a hash decides per candidate: the share is binomial(n, f)
        assert abs(flipped - f) < 4 * np.sqrt(f * (1 - f) / arm.height), f
    placebo = rewards.filter(pl.col("arm") == "placebo")
    shares = placebo.group_by("seed", "task_id").agg(
        pl.col("reward").sum().alias("r"), pl.col("passed").cast(pl.Float64).sum().alias("p")
    )
    assert (shares["r"] == shares["p"]).all()  # shuffled within the group: the same share


def _advantages_by_hand(rows: pl.DataFrame) -> Iterator[tuple[int, list[str], np.ndarray]]:
    """Per (seed, task) group of `rows` that GRPO steps on: its scored candidates' ids and
    advantages, written out here (ART's, less its 1e-6 epsilon: `judgelab.advantage`'s
    population std; a flat group is skipped)."""
    for (seed, _), group in rows.group_by("seed", "task_id"):
        scored = group.filter(pl.col("reward").is_not_null())
        r = scored["reward"].to_numpy()
        if r.size >= 2 and np.ptp(r) > 0:
            yield seed, scored["candidate_id"].to_list(), (r - r.mean()) / r.std()


def test_each_arms_effect_recomputes_by_hand_from_the_slopes() -> None:
    """η Σ_i A_i s_i / Σ_i |A_i| over every group (`_advantages_by_hand`)."""
    raw = _effects()
    lr = load_settings(ROOT / "reference" / "params.yaml").train.learning_rate
    slope = {(r["seed"], r["candidate_id"]): r["slope"] for r in raw["slopes"]}
    rewards = pl.read_parquet(STUDY / "rewards.parquet")
    for arm, pooled in raw["pooled"].items():
        num = den = 0.0
        for seed, ids, a in _advantages_by_hand(rewards.filter(pl.col("arm") == arm)):
            s = np.array([slope[(seed, c)] for c in ids])
            num, den = num + float(a @ s), den + float(np.abs(a).sum())
        want = lr * num / den if den > 0 else 0.0
        assert pooled["effect"] == pytest.approx(want, rel=1e-6, abs=1e-15), arm
    if any("slope_bank" in r for r in raw["slopes"]):  # a study with per-bank slopes
        for key, want_b in _bank_effects_by_hand(raw, rewards, lr).items():
            got = next(e["bank_effects"] for e in raw["effects"] if (e["arm"], e["seed"]) == key)
            assert got.keys() == want_b.keys(), key
            for b, (value, scale) in want_b.items():
                # the slopes are stored to 9 digits: a sum that cancels keeps their error
                assert got[b] == pytest.approx(value, rel=1e-6, abs=1e-7 * scale), (key, b)


def _bank_effects_by_hand(raw: dict, rewards: pl.DataFrame, lr: float) -> dict:
    """(arm, seed) -> bank task -> (η Σ A_i s_ib / Σ |A_i| over the seed's groups, and the
    same with |A_i s_ib|: the scale of the sum's terms)."""
    per_bank = {(r["seed"], r["candidate_id"]): r["slope_bank"] for r in raw["slopes"]}
    banks = sorted(next(iter(per_bank.values())))
    out = {}
    for (arm, seed), rows in rewards.group_by("arm", "seed"):
        num, mag, den = dict.fromkeys(banks, 0.0), dict.fromkeys(banks, 0.0), 0.0
        for _, ids, a in _advantages_by_hand(rows):
            den += float(np.abs(a).sum())
            for c, a_i in zip(ids, a, strict=True):
                for b in banks:
                    num[b] += float(a_i) * per_bank[(seed, c)][b]
                    mag[b] += abs(float(a_i) * per_bank[(seed, c)][b])
        out[(arm, seed)] = {b: (lr * num[b] / den, lr * mag[b] / den) if den > 0 else (0.0, 0.0)
                            for b in banks}  # fmt: skip
    return out


def _close(a: object, b: object, where: str = "") -> None:
    """Equal, floats to 1e-9 (a JSON round trip), through nested dicts and lists."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list | tuple) and isinstance(b, list | tuple):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{where}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        # 9 significant digits in the files: a bootstrap's rank ties may break apart at 1e-5
        assert a == pytest.approx(b, rel=1e-4, abs=1e-12), where
    else:
        assert a == b, where


def test_every_figure_recomputes_from_the_tables() -> None:
    settings = load_settings(ROOT / "reference" / "params.yaml")
    raw = _effects()
    plan, effects = raw["settings"], raw["effects"]
    rewards = pl.read_parquet(STUDY / "rewards.parquet")
    analysis = settings.analysis
    rule = CIRule.of(analysis)
    audits = arm_audit(rewards, rule, analysis.praise_threshold)
    preds = predictions(audits, effects, plan["min_ci_arms"], plan["bootstrap"], plan["seed"])
    pooled = pooled_effects(raw["terms"], settings.train.learning_rate,
                            rule.resampled(plan["bootstrap"], plan["seed"]))  # fmt: skip
    flips = {f"flip-{f:g}": f for f in plan["flips"]}
    check = first_order_check(pooled, flips, "placebo",
                              rule.resampled(plan["bootstrap"], plan["seed"]))  # fmt: skip
    resampled = rule.resampled(plan["bootstrap"], plan["seed"])
    draws = arm_figure_draws(rewards, effect_units(raw["terms"]), resampled, "signal_fidelity",
                             analysis.praise_threshold)  # fmt: skip
    vs = judges_vs_planted(pooled, audits, flips, "placebo", resampled,
                           figure_draws=draws)  # fmt: skip
    committed = json.loads((STUDY / "prediction.json").read_text())
    _close(committed["predictions"], clean_json(preds, STUDY_DIGITS, significant=True))
    _close(committed["effect_check"], clean_json(check, STUDY_DIGITS, significant=True))
    _close(committed["judges_vs_planted"], clean_json(vs, STUDY_DIGITS, significant=True))
    # independently: the planted arms' line (numpy) and each judge's distance from it
    planted = sorted(flips)
    slope, intercept = np.polyfit([audits[a]["signal_fidelity"] for a in planted],
                                  [pooled[a]["effect"] for a in planted], 1)  # fmt: skip
    for arm, j in committed["judges_vs_planted"]["judges"].items():
        off = pooled[arm]["effect"] - (intercept + slope * audits[arm]["signal_fidelity"])
        assert j["residual"] == pytest.approx(off, rel=1e-6)
    trimmed = {a: {k: v for k, v in p.items() if k not in UNSAVED} for a, p in pooled.items()}
    _close(raw["pooled"], clean_json(trimmed, STUDY_DIGITS, significant=True))
    # independently: Spearman of each arm's signal fidelity with its effect (scipy)
    primary = committed["predictions"][0]
    arms = [r["arm"] for r in primary["arms"]]
    mean = {a: np.mean([e["effect"] for e in effects if e["arm"] == a]) for a in arms}
    rho = scipy_stats.spearmanr([audits[a]["signal_fidelity"] for a in arms],
                                [mean[a] for a in arms]).statistic  # fmt: skip
    assert primary["spearman"] == pytest.approx(rho, abs=1e-9)
    # and the study's own words state the committed check
    text = (STUDY / "study.md").read_text()
    assert ("passes its check" in text) == bool(check["holds"])


def test_each_figure_draw_is_the_figure_of_its_resampled_table() -> None:
    """`arm_figure_draws` against the analysis run on each resample written out as a table:
    every task's rows repeated as often as the resample draws it (each copy a task of its
    own), the arm's signal fidelity from `arm_audit` with no bootstrap."""
    from judgelab.analysis.stats import resample_weights

    arms = ["flip-0.25", "ruler-qwen-1.5b"]
    rewards = pl.read_parquet(STUDY / "rewards.parquet").filter(pl.col("arm").is_in(arms))
    units = effect_units(_effects()["terms"])
    rule = CIRule(min_ci_groups=5, n_boot=3, seed=7, level=0.95)
    draws = arm_figure_draws(rewards, units, rule, "signal_fidelity", 0.8)
    weights = resample_weights(len(units), rule.n_boot, rule.seed)
    for r in range(rule.n_boot):
        copies = [
            rewards.filter(pl.col("task_id") == u).with_columns(
                pl.lit(f"{u}#{c}").alias("task_id"), pl.col("candidate_id") + f"#{c}"
            )
            for u, w in zip(units, weights[r], strict=True)
            for c in range(int(w))
        ]
        audits = arm_audit(pl.concat(copies), replace(rule, n_boot=0), 0.8)
        for arm in arms:
            assert draws[arm][r] == pytest.approx(audits[arm]["signal_fidelity"], rel=1e-9)


def test_the_committed_files_are_what_reanalyse_writes(tmp_path: Path) -> None:
    """`judgelab study --reanalyse` (no model, no training) on a copy of the committed
    effects.json and rewards.parquet writes the committed prediction.json and study.md; and it
    names a missing input."""
    import shutil

    from typer.testing import CliRunner

    from judgelab_cli.main import app

    out = tmp_path / "study"
    out.mkdir()
    for name in ("effects.json", "rewards.parquet"):
        shutil.copy(STUDY / name, out / name)
    params = ROOT / "reference" / "params.yaml"
    result = CliRunner().invoke(app, ["study", "--reanalyse", "-p", str(params), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "study.md").read_text() == (STUDY / "study.md").read_text()
    _close(json.loads((out / "prediction.json").read_text()),
           json.loads((STUDY / "prediction.json").read_text()))  # fmt: skip
    (out / "rewards.parquet").unlink()
    result = CliRunner().invoke(app, ["study", "--reanalyse", "-p", str(params), "--out", str(out)])
    assert result.exit_code != 0 and "rewards.parquet does not exist" in result.output


def test_the_seeds_share_their_groups_so_a_task_is_one_cluster() -> None:
    """The committed study's three seeds trained on the same 224 candidates with the same
    rewards (draws.py: a first-order study on a table's groups): each arm's audit is its
    one-seed audit, over 56 tasks at most, never 168 groups; and the placebo's signal
    fidelity, 0.146, has a CI that covers 0 once its copies stop counting as groups (issue 63:
    [0.013, 0.279] with 168, about [−0.08, 0.38] with 56)."""
    from judgelab.analysis.prediction import shared_groups

    settings = load_settings(ROOT / "reference" / "params.yaml")
    rule = CIRule.of(settings.analysis)
    rewards = pl.read_parquet(STUDY / "rewards.parquet")
    assert all(shared_groups(rewards.filter(pl.col("arm") == a))
               for a in rewards["arm"].unique())  # fmt: skip
    arms = ["placebo", "ruler-qwen-1.5b"]
    rewards = rewards.filter(pl.col("arm").is_in(arms))
    audits = arm_audit(rewards, rule, settings.analysis.praise_threshold)
    alone = arm_audit(rewards.filter(pl.col("seed") == 0), rule, 0.8)
    assert audits == alone
    tasks = rewards["task_id"].n_unique()
    assert tasks == 56
    for arm in arms:
        assert audits[arm]["n_tasks"] <= tasks
        assert audits[arm]["signal_fidelity_n_groups"] <= tasks
    placebo = audits["placebo"]
    assert placebo["signal_fidelity"] == pytest.approx(0.161, abs=5e-4)
    assert placebo["signal_fidelity_ci_low"] < 0 < placebo["signal_fidelity_ci_high"]


def test_the_committed_study_resamples_its_bank() -> None:
    """The committed study kept per-bank slopes (issue 63): its terms carry N per contrast bank
    task, every effect its bank effects, and its intervals resample the training tasks and
    the bank's 8 tasks crossed; study.md says so, and each bank effect's mean is the effect."""
    from judgelab.analysis.prediction import effect_banks

    raw = _effects()
    banks = effect_banks(raw["terms"])
    assert banks is not None and len(banks) == raw["bank"]["bank_contrast_tasks"] == 8
    for e in raw["effects"]:
        assert sorted(e["bank_effects"]) == banks, (e["arm"], e["seed"])
        mean = sum(e["bank_effects"].values()) / len(banks)
        assert mean == pytest.approx(e["effect"], rel=1e-6, abs=1e-15), (e["arm"], e["seed"])
    assert {row["bank_tasks_resampled"] for row in raw["pooled"].values()} == {8}
    # README: one step on the tests' verdicts raises 5 bank tasks and lowers 3, at every seed
    truth = [e["bank_effects"] for e in raw["effects"] if e["arm"] == "flip-0"]
    assert len(truth) == 3
    raised = {frozenset(b for b, v in each.items() if v > 0) for each in truth}
    assert len(raised) == 1 and len(raised.pop()) == 5  # the same 5 at every seed
    for r in raw["slopes"]:  # each stored to 9 digits
        scale = sum(abs(v) for v in r["slope_bank"].values()) / len(banks)
        whole = sum(r["slope_bank"].values()) / len(banks)
        assert r["slope"] == pytest.approx(whole, abs=1e-8 * scale)
    prediction = json.loads((STUDY / "prediction.json").read_text())
    assert prediction["predictions"][0]["bank_tasks_resampled"] == 8
    assert prediction["effect_check"]["bank_tasks_resampled"] == 8
    assert prediction["judges_vs_planted"]["bank_tasks_resampled"] == 8
    text = (STUDY / "study.md").read_text()
    assert "these 8 bank tasks (a crossed bootstrap)" in text and "bank fixed" not in text
    assert "on 5 of the 8 bank tasks and lowering it on 3" in text
    assert "95 % CI over tasks × bank tasks" in text


def test_reanalyse_holds_the_bank_fixed_where_the_terms_lack_it(tmp_path: Path) -> None:
    """The committed study with its per-bank terms taken out (a study written before they
    were kept): `--reanalyse` writes the same effects, intervals over the training tasks
    only, and a study.md that says the bank is held fixed. The committed crossed intervals
    are wider where the effect is large (the bank tasks' effects spread in proportion to it:
    the planted arms at flip rates 0, 0.1, 0.9 and 1), and it is the bank's spread that fails
    the committed check: held fixed, the check passes."""
    from typer.testing import CliRunner

    from judgelab_cli.main import app

    raw = _effects()
    for t in raw["terms"]:
        del t["n_bank"]
    for e in raw["effects"]:
        del e["bank_effects"]
    out = tmp_path / "study"
    out.mkdir()
    (out / "effects.json").write_text(json.dumps(raw))
    (out / "rewards.parquet").write_bytes((STUDY / "rewards.parquet").read_bytes())
    params = ROOT / "reference" / "params.yaml"
    result = CliRunner().invoke(app, ["study", "--reanalyse", "-p", str(params), "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = json.loads((out / "effects.json").read_text())
    text = (out / "study.md").read_text()
    assert "Its intervals hold the bank fixed" in text and "crossed bootstrap" not in text
    assert "the choice of these 8 bank tasks is not in them" in text
    assert "95 % CI over tasks |" in text
    assert "passes its check" in text
    assert "passes its check" not in (STUDY / "study.md").read_text()
    for arm, row in written["pooled"].items():
        crossed = raw["pooled"][arm]
        assert "bank_tasks_resampled" not in row
        assert row["effect"] == pytest.approx(crossed["effect"], rel=1e-6)
        if arm in ("flip-0", "flip-0.1", "flip-0.9", "flip-1"):
            assert row["ci_high"] - row["ci_low"] < crossed["ci_high"] - crossed["ci_low"], arm
    prediction = json.loads((out / "prediction.json").read_text())
    assert "bank_tasks_resampled" not in prediction["effect_check"]
    assert "bank_tasks_resampled" not in prediction["judges_vs_planted"]
