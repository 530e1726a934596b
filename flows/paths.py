"""The files that cross stage boundaries (also named in dvc.yaml)."""

from pathlib import Path

TASKS = Path("data/tasks/tasks.parquet")
ROLLOUTS = Path("data/rollouts/rollouts.parquet")
SCORES = Path("data/scores/scores.parquet")
ANALYSIS = Path("data/analysis")
TRAINING = Path("data/training")  # <judge>/history.parquet, when training has run
PROBES_METRICS = Path("data/probes/metrics.json")  # when the bias probes have run
