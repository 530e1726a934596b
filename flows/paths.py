"""The files that cross stage boundaries (also named in dvc.yaml)."""

from pathlib import Path

TASKS = Path("data/tasks/tasks.parquet")
ROLLOUTS = Path("data/rollouts/rollouts.parquet")
SCORES = Path("data/scores/scores.parquet")
TRAINING = Path("data/training")
ANALYSIS = Path("data/analysis")
PROBES = Path("data/probes")
PROBES_METRICS = Path("data/probes/metrics.json")  # when the bias probes have run
