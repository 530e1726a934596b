"""`judgelab study`: does the audit predict training? Planted arms, a placebo and your judges
trained from the same base on the same groups; each one's effect on a bank of held-out
samples against its audit figures (docs/TRAINING.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from judgelab.flows.paths import TASKS
from judgelab_cli.errors import exit_on_error

if TYPE_CHECKING:
    from judgelab.config import Settings
    from judgelab.config.training import StudySettings
    from judgelab.training.study import StudyResult


PARAMS, OUT = Path("params.yaml"), Path("data/study")
ROLLOUTS_HELP = (
    "Train on an audit's own groups: its rollouts table (e.g. data/rollouts/rollouts.parquet) "
    "instead of samples drawn from train.policy."
)
REANALYSE_HELP = (
    "Train nothing: recompute the figures and study.md from the effects.json and "
    "rewards.parquet already under --out (with this params file's analysis settings); the "
    "study's own options are read from effects.json."
)


def study(
    params: Annotated[Path, typer.Option("--params", "-p", help="Parameters file.")] = PARAMS,
    tasks: Annotated[Path, typer.Option("--tasks", help="Tasks table (training tasks).")] = TASKS,
    out: Annotated[Path, typer.Option("--out", help="Where the study's files go.")] = OUT,
    arm: Annotated[
        list[str] | None,
        typer.Option(
            "--arm", help="An evaluator of scores.evaluators to train on as an arm (repeatable)."
        ),  # fmt: skip
    ] = None,
    flips: Annotated[
        str, typer.Option(help="Planted arms' flip rates, comma-separated ('' for none).")
    ] = "0,0.25,0.5,0.75,1",
    placebo: Annotated[bool, typer.Option(help="Add the shuffled-reward placebo arm.")] = True,
    seeds: Annotated[str, typer.Option(help="Training seeds, comma-separated.")] = "0,1,2",
    method: Annotated[
        str, typer.Option(help="first-order (one pass for every arm) or steps (docs/TRAINING.md).")
    ] = "first-order",
    steps: Annotated[
        int, typer.Option(min=1, help="With --method steps: GRPO steps per arm and seed.")
    ] = 2,
    groups: Annotated[int, typer.Option(min=1, help="Training groups per seed.")] = 4,
    bank: Annotated[
        str, typer.Option(help="Bank task ids, comma-separated ('': train.heldout's pool).")
    ] = "",
    bank_samples: Annotated[int, typer.Option(min=2, help="Samples per bank task.")] = 8,
    rollouts: Annotated[str | None, typer.Option(help=ROLLOUTS_HELP)] = None,
    bank_size: Annotated[int, typer.Option(min=1, help="--rollouts, no --bank: bank tasks.")] = 8,
    min_ci_arms: Annotated[int, typer.Option(min=3, help="Fewest arms for a CI.")] = 6,
    reanalyse: Annotated[bool, typer.Option(help=REANALYSE_HELP)] = False,
) -> None:
    """What one GRPO step of each arm from the base policy on the same groups (only the
    reward differs) does to a bank of held-out samples: to first order for every arm at once
    (the default), or by a few steps per arm (--method steps); and how well each audit figure
    predicts it (CIs over tasks, bank tasks and seeds). Writes effects.json, rewards.parquet,
    prediction.json and study.md."""
    from judgelab.config import load_settings
    from judgelab.config.training import StudySettings
    from judgelab.training.study import run_study, study_tasks

    split = lambda s, kind: [kind(x) for x in s.split(",") if x.strip()]  # noqa: E731
    with exit_on_error():
        settings = load_settings(params)
        if reanalyse:
            plan, result = _from_files(out)
        else:
            plan = StudySettings(
                arms=arm or [], flips=split(flips, float), placebo=placebo,
                seeds=split(seeds, int), method=method, steps=steps, groups=groups,
                bank_ids=split(bank, str), bank_samples=bank_samples, min_ci_arms=min_ci_arms,
                rollouts=rollouts, bank_size=bank_size,
            )  # fmt: skip
            result = run_study(settings, plan, study_tasks(tasks), progress=typer.echo)
        typer.echo(_write(settings, plan, result, out))


def _from_files(out: Path) -> tuple[StudySettings, StudyResult]:
    """A written study's settings and raw results, from its effects.json and rewards.parquet."""
    import json

    import polars as pl

    from judgelab.config.training import StudySettings
    from judgelab.errors import ConfigError
    from judgelab.training.study import StudyResult

    effects, rewards = out / "effects.json", out / "rewards.parquet"
    for path in (effects, rewards):
        if not path.exists():
            raise ConfigError(f"--reanalyse: {path} does not exist (run the study first)")
    raw = json.loads(effects.read_text())
    result = StudyResult(
        effects=raw["effects"], rewards=pl.read_parquet(rewards).to_dicts(),
        terms=raw.get("terms") or [], slopes=raw.get("slopes") or [], bank=raw["bank"],
        bank_tasks=raw["bank_tasks"], seconds=raw["seconds"],
    )  # fmt: skip
    return StudySettings(**raw["settings"]), result


def _write(settings: Settings, plan: StudySettings, result: StudyResult, out: Path) -> str:
    """The study's figures (each arm's audit, the predictions, the effect measure's check)
    written under `out`; study.md's text."""
    from judgelab.analysis.prediction import (
        UNSAVED,
        arm_audit,
        arm_figure_draws,
        arms_apart,
        effect_check,
        effect_units,
        first_order_check,
        judges_vs_planted,
        pooled_effects,
        predictions,
        reward_frame,
    )
    from judgelab.analysis.stats import CIRule
    from judgelab.report.prediction import study_markdown, write_study
    from judgelab.training.study import planted_arms

    rewards = reward_frame(result.rewards)
    analysis = settings.analysis
    rule = CIRule.of(analysis)
    audits = arm_audit(rewards, rule, analysis.praise_threshold)
    preds = predictions(audits, result.effects, plan.min_ci_arms, plan.bootstrap, plan.seed)
    planted = planted_arms(plan, settings.test_runner())
    flips = {p.name: p.flip for p in planted if not p.shuffle}
    placebo = next((p.name for p in planted if p.shuffle), None)
    raw = {"settings": plan.model_dump(), "bank": result.bank, "bank_tasks": result.bank_tasks,
           "seconds": result.seconds}  # fmt: skip
    pooled, vs = None, None
    if plan.method == "first-order":
        resampled = rule.resampled(plan.bootstrap, plan.seed)
        pooled = pooled_effects(result.terms, settings.train.learning_rate, resampled)
        check = first_order_check(pooled, flips, placebo, resampled)
        if preds:
            figure = preds[0]["figure"]
            draws = arm_figure_draws(rewards, effect_units(result.terms), resampled, figure,
                                     analysis.praise_threshold)  # fmt: skip
            vs = judges_vs_planted(pooled, audits, flips, placebo, resampled, figure, draws)
        raw |= {"terms": result.terms, "slopes": result.slopes,
                "pooled": {a: {k: v for k, v in p.items() if k not in UNSAVED}
                           for a, p in pooled.items()}}  # fmt: skip
        effects = {a: float(p["effect"]) for a, p in pooled.items()}
    else:
        check = effect_check(result.effects, flips, placebo)
        effects = {r["arm"]: r["effect_mean"] for r in (preds[0]["arms"] if preds else [])}
    apart = arms_apart(audits, effects, flips, placebo, preds[0]["figure"]) if preds else None
    text = study_markdown(preds, result.bank, result.seconds, check, pooled, vs, apart)
    write_study(out, rewards, raw | {"effects": result.effects}, preds, audits, text, check, vs,
                apart)  # fmt: skip
    return text
