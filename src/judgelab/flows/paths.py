"""The files that cross stage boundaries, relative to the project root: the flows' defaults
and the stage table's DVC deps and outs (judgelab.flows.stages) both come from here."""

from __future__ import annotations

from pathlib import Path

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
