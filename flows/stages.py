"""The stage table: each stage's name, command, flow, the files it reads and writes, the models
it needs and the params its output depends on. Everything else that knows the stages derives
from it: the CLI's commands and preflight checks (judgelab_cli), the flows' default paths, and
tests/unit/test_stage_table.py, which holds dvc.yaml and probes/dvc.yaml to it.

Reading the table is cheap (`judgelab --help` reads it): each flow is named by a function that
imports it when called, and the models each stage needs are computed by functions that import
the library only when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefect import Flow

    from judgelab.config import Settings

# The files that cross stage boundaries, relative to the project root.
TASKS = Path("data/tasks/tasks.parquet")
TASKS_DROPPED = Path("data/tasks/dropped.json")  # what each task source left out, and why
ROLLOUTS = Path("data/rollouts/rollouts.parquet")
SCORES = Path("data/scores/scores.parquet")
TRAINING = Path("data/training")
ANALYSIS = Path("data/analysis")
PROBES = Path("data/probes")
# Read by the analysis when the bias probes have run. Not a DVC dependency: DVC has no
# optional ones, and a dependency on anything under data/probes would make the probes stage
# upstream of the analysis, so `dvc repro` would run them. The analysis depends instead on
# PROBES_RECORD, the probes pipeline's folder: it always exists (probes/dvc.yaml), and
# `dvc repro probes/dvc.yaml` (make probe) writes each new result's hash into its dvc.lock.
PROBES_METRICS = PROBES / "metrics.json"
PROBES_RECORD = Path("probes")

# The schema (judgelab.schemas kind) of each table a stage's preflight validates before it reads.
SCHEMAS = {TASKS: "tasks", ROLLOUTS: "rollouts", SCORES: "scores"}


def _tasks_flow() -> Flow:
    from flows.tasks import tasks_flow

    return tasks_flow


def _rollouts_flow() -> Flow:
    from flows.rollouts import rollouts_flow

    return rollouts_flow


def _scores_flow() -> Flow:
    from flows.scores import scores_flow

    return scores_flow


def _training_flow() -> Flow:
    from flows.training import training_flow

    return training_flow


def _analysis_flow() -> Flow:
    from flows.analysis import analysis_flow

    return analysis_flow


def _probe_flow() -> Flow:
    from flows.probe import probe_flow

    return probe_flow


def _pipeline_flow() -> Flow:
    from flows.pipeline import pipeline_flow

    return pipeline_flow


def _no_models(settings: Settings) -> list[str]:
    return []


def _autorl_model(settings: Settings) -> list[str]:
    autorl = settings.tasks.autorl
    return [autorl.model] if autorl.enabled and autorl.n else []


def _policy(settings: Settings) -> list[str]:
    if settings.rollouts.candidates is not None:  # imported: no policy is sampled
        return []
    return settings.rollouts.writers


def _judge_models(settings: Settings) -> list[str]:
    from judgelab.scoring import judge_names

    return judge_names(settings)


def _trained_judge_models(settings: Settings) -> list[str]:
    from judgelab.training.run import judge_models

    return judge_models(settings)


def _probe_models(settings: Settings) -> list[str]:
    from judgelab.probes.run import models_needed

    return models_needed(settings)


def _require_probed_judges(settings: Settings) -> None:
    from judgelab.probes.run import require_judges

    require_judges(settings)


@dataclass(frozen=True)
class Stage:
    name: str  # the DVC stage; errors name the stage by it
    command: str  # `judgelab <command>`
    help: str  # the command's help
    flow: Callable[[], Flow]  # imports and returns the stage's flow
    reads: tuple[Path, ...] = ()  # DVC deps; those in SCHEMAS are validated before the flow
    # DVC deps that stand for a file the flow reads only when it exists (PROBES_RECORD)
    watches: tuple[Path, ...] = ()
    writes: tuple[Path, ...] = ()  # DVC outs, metrics and plots
    # The params.yaml sections, or dotted keys of a section, whose values change the output.
    # Speed-only settings are left out: `server` and the models' rate limits.
    params: tuple[str, ...] = ()
    models: Callable[[Settings], list[str]] = _no_models  # registry models the flow calls
    check: Callable[[Settings], None] | None = None  # a stage-specific config check
    dvc_file: Path | None = Path("dvc.yaml")  # None: not a DVC stage
    aliases: tuple[str, ...] = ()  # former command names, still accepted, not in --help

    def tables(self) -> list[tuple[Path, str]]:
        """(path, schema kind) of each input table with a schema."""
        return [(path, SCHEMAS[path]) for path in self.reads if path in SCHEMAS]


PIPELINE_STAGES = (
    Stage(
        name="tasks",
        command="tasks",
        help="Freeze the coding tasks: HumanEval, your task files, CodeI/O (tests computed in the "
        "sandbox) + AutoRL requests written by the policy.",
        flow=_tasks_flow,
        writes=(TASKS, TASKS_DROPPED),
        params=("tasks", "models"),
        models=_autorl_model,
    ),
    Stage(
        name="rollouts",
        command="rollouts",
        help="Sample k candidate solutions per task from the policy (cached, resumable).",
        flow=_rollouts_flow,
        reads=(TASKS,),
        writes=(ROLLOUTS,),
        params=("rollouts", "models"),
        models=_policy,
    ),
    Stage(
        name="scores",
        command="scores",
        help="Score every group with every evaluator (rules, execution, RULER, rubric).",
        flow=_scores_flow,
        reads=(TASKS, ROLLOUTS),
        writes=(SCORES,),
        params=("scores", "models"),
        models=_judge_models,
    ),
    Stage(
        name="training",
        command="training",
        help="GRPO with LoRA: one policy per judge in train.judges, resumable, per-epoch history.",
        flow=_training_flow,
        reads=(TASKS,),
        writes=(TRAINING,),
        # The policy's prompt is the rollouts' system prompt; its sampling is train's own
        # (train.k is the GRPO group size, not rollouts.k). The judges' settings are theirs
        # in scores.evaluators; training scores with repeat 0 only (no scores.repeats).
        params=("train", "rollouts.system_prompt", "scores.evaluators", "models"),
        models=_trained_judge_models,
        aliases=("train",),  # the command's name before it was the stage's
    ),
    Stage(
        name="analysis",
        command="analysis",
        help="Judge statistics, agreement with execution truth, plots, report, MLflow run.",
        flow=_analysis_flow,
        reads=(TASKS, ROLLOUTS, SCORES, TRAINING),
        watches=(PROBES_RECORD,),  # PROBES_METRICS, the report's bias panels
        writes=(
            ANALYSIS / "report.md",
            ANALYSIS / "report.html",
            ANALYSIS / "plots/png",
            ANALYSIS / "metrics.json",
            ANALYSIS / "plots/judge_vs_truth.csv",
            ANALYSIS / "plots/judge_comparison.csv",
            ANALYSIS / "plots/score_distribution.csv",
            ANALYSIS / "plots/training_curves.csv",
        ),
        # train.judges: the report says which configured judges lack training output. The
        # MLflow run also logs settings of the stages before (rollouts, scores, train), whose
        # tables this stage reads.
        params=("analysis", "tracking", "train.judges"),
    ),
)

PROBES_STAGE = Stage(
    name="probes",
    command="probes",
    aliases=("probe",),  # the command's name before it was the stage's
    help="Bias probes of the judges (params.yaml `probes:`): known truth, position, "
    "perturbation, self-preference, attacks, agreement, cost -> data/probes/ (tables, "
    "metrics.json, report.md, plots). Not part of `dvc repro`; also `dvc repro "
    "probes/dvc.yaml`. Exit code 3: the attack gate (--fail-above) refused a judge.",
    flow=_probe_flow,
    writes=(
        PROBES / "candidates.parquet",
        PROBES / "probe_scores.parquet",
        PROBES / "calls.parquet",
        PROBES / "report.md",
        PROBES / "plots",
        PROBES_METRICS,
    ),
    # The probed judges' and the execution evaluator's settings (not scores.repeats: the
    # probes repeat probes.repeats times); the self-preference writers sample with the
    # rollouts' settings but their own model and count (not rollouts.policy, rollouts.k).
    # probes.tasks are built by their source with its settings (CodeI/O's cases and seed,
    # your task files).
    params=(
        "probes",
        "tasks.codeio",
        "tasks.files",
        "analysis.min_ci_groups",
        "models",
        "scores.evaluators",
        "rollouts.temperature",
        "rollouts.top_p",
        "rollouts.max_tokens",
        "rollouts.seed",
        "rollouts.system_prompt",
    ),
    models=_probe_models,
    check=_require_probed_judges,
    dvc_file=Path("probes/dvc.yaml"),
)


def _pipeline_models(settings: Settings) -> list[str]:
    return [name for stage in PIPELINE_STAGES for name in stage.models(settings)]


PIPELINE = Stage(
    name="pipeline",
    command="pipeline",
    help="Run the whole chain in one Prefect flow (dvc repro runs the stages one by one).",
    flow=_pipeline_flow,  # makes every table it reads, so its preflight validates none
    models=_pipeline_models,
    dvc_file=None,
)

# In the order of `judgelab --help`.
STAGES = (*PIPELINE_STAGES, PROBES_STAGE, PIPELINE)
