"""The stage table: each stage's name, command, flow, the files it reads and writes and the
params its output depends on. Everything else that knows the stages derives from it: the CLI's
commands and preflight checks (judgelab_cli) and tests/unit/test_stage_table.py, which holds
dvc.yaml and probes/dvc.yaml to it. The files are named in judgelab.flows.paths, which the
flows import for their defaults; the models each stage calls: `Settings.models_called`.

Reading the table is cheap (`judgelab --help` reads it): a stage's flow is imported only when
`Stage.flow()` is called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from judgelab.flows.paths import (
    ANALYSIS,
    PROBES,
    PROBES_METRICS,
    PROBES_RECORD,
    ROLLOUTS,
    SCHEMAS,
    SCORES,
    TASKS,
    TASKS_DROPPED,
    TRAINING,
)

if TYPE_CHECKING:
    from prefect import Flow

    from judgelab.config import Settings


def _require_probed_judges(settings: Settings) -> None:
    from judgelab.probes.run import require_judges

    require_judges(settings)


def load_flow(name: str) -> Flow:
    """The flow of stage `name`, imported now (each flow module imports prefect and the part
    of the library it runs)."""
    if name == "tasks":
        from judgelab.flows.tasks import tasks_flow

        return tasks_flow
    if name == "rollouts":
        from judgelab.flows.rollouts import rollouts_flow

        return rollouts_flow
    if name == "scores":
        from judgelab.flows.scores import scores_flow

        return scores_flow
    if name == "training":
        from judgelab.flows.training import training_flow

        return training_flow
    if name == "analysis":
        from judgelab.flows.analysis import analysis_flow

        return analysis_flow
    if name == "probes":
        from judgelab.flows.probe import probe_flow

        return probe_flow
    if name == "pipeline":
        from judgelab.flows.pipeline import pipeline_flow

        return pipeline_flow
    raise KeyError(f"no flow for stage {name!r}")


@dataclass(frozen=True)
class Stage:
    name: str  # the DVC stage; errors name the stage by it
    command: str  # `judgelab <command>`
    help: str  # the command's help
    reads: tuple[Path, ...] = ()  # DVC deps; those in SCHEMAS are validated before the flow
    # DVC deps that stand for a file the flow reads only when it exists (PROBES_RECORD)
    watches: tuple[Path, ...] = ()
    writes: tuple[Path, ...] = ()  # DVC outs, metrics and plots
    # The params.yaml sections, or dotted keys of a section, whose values change the output.
    # Speed-only settings are left out: `server` and the models' rate limits.
    params: tuple[str, ...] = ()
    check: Callable[[Settings], None] | None = None  # a stage-specific config check
    dvc_file: Path | None = Path("dvc.yaml")  # None: not a DVC stage

    def flow(self) -> Flow:
        """The stage's Prefect flow (its module is imported now)."""
        return load_flow(self.name)

    def models(self, settings: Settings) -> list[str]:
        """The registry models the stage's flow calls."""
        return settings.models_called(self.name)

    def tables(self) -> list[tuple[Path, str]]:
        """(path, schema kind) of each input table with a schema."""
        return [(path, SCHEMAS[path]) for path in self.reads if path in SCHEMAS]


PIPELINE_STAGES = (
    Stage(
        name="tasks",
        command="tasks",
        help="Freeze the coding tasks: HumanEval, your task files, CodeI/O (tests computed in the "
        "sandbox) + AutoRL requests written by the policy.",
        writes=(TASKS, TASKS_DROPPED),
        params=("tasks", "models"),
    ),
    Stage(
        name="rollouts",
        command="rollouts",
        help="Sample k candidate solutions per task from the policy (cached, resumable).",
        reads=(TASKS,),
        writes=(ROLLOUTS,),
        params=("rollouts", "models"),
    ),
    Stage(
        name="scores",
        command="scores",
        help="Score every group with every evaluator (rules, execution, RULER, rubric).",
        reads=(TASKS, ROLLOUTS),
        writes=(SCORES,),
        params=("scores", "models"),
    ),
    Stage(
        name="training",
        command="training",
        help="GRPO with LoRA: one policy per judge in train.rewards, resumable, per-epoch history.",
        reads=(TASKS,),
        writes=(TRAINING,),
        # The policy's prompt is the rollouts' system prompt; its sampling is train's own
        # (train.k is the GRPO group size, not rollouts.k). The judges' settings are theirs
        # in scores.evaluators; training scores with repeat 0 only (no scores.repeats). The
        # held-out tasks are built by their sources (tasks.codeio's cases and seed, your
        # files under inputs/); the tests run as the truth's evaluator runs them.
        params=(
            "train",
            "rollouts.system_prompt",
            "scores.evaluators",
            "tasks.codeio",
            "tasks.files",
            "analysis.min_ci_groups",  # the history's alignment CIs
            "analysis.truth",
            "models",
        ),
    ),
    Stage(
        name="analysis",
        command="analysis",
        help="Judge statistics, agreement with execution truth, plots, report, MLflow run.",
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
        # train.rewards: the report says which configured judges lack training output.
        # scores.max_failure_share: the report's first section names the judges whose calls
        # failed beyond it; scores.populations: how the headline's candidates were judged.
        # models and train.policy: the report's provenance shows the fingerprint of every
        # model behind the tables (the policy trained among them). The MLflow run also logs
        # settings of the stages before (rollouts, scores, train), whose tables this stage
        # reads; that run is no DVC output. train.alarm_alpha: the alarm's one alpha, whose
        # threshold and reach the report states.
        params=(
            "analysis",
            "tracking",
            "train.rewards",
            "train.policy",
            "train.alarm_alpha",
            "scores.max_failure_share",
            "scores.populations",
            "models",
        ),
    ),
)

PROBES_STAGE = Stage(
    name="probes",
    command="probes",
    help="Bias probes of the judges (params.yaml `probes:`): known truth, position, "
    "perturbation, self-preference, attacks, agreement, cost -> data/probes/ (tables, "
    "metrics.json, report.md, plots). Not part of `dvc repro`; also `dvc repro "
    "probes/dvc.yaml`. Exit code 3: the attack gate (--fail-above) refused a judge.",
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
        "analysis.truth",
        "models",
        "scores.evaluators",
        "rollouts.temperature",
        "rollouts.top_p",
        "rollouts.max_tokens",
        "rollouts.seed",
        "rollouts.system_prompt",
    ),
    check=_require_probed_judges,
    dvc_file=Path("probes/dvc.yaml"),
)


PIPELINE = Stage(
    name="pipeline",
    command="pipeline",
    help="Run the whole chain in one Prefect flow (dvc repro runs the stages one by one).",
    dvc_file=None,  # makes every table it reads, so its preflight validates none
)

# In the order of `judgelab --help`.
STAGES = (*PIPELINE_STAGES, PROBES_STAGE, PIPELINE)
