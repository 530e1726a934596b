"""The whole chain in one Prefect flow: tasks -> rollouts -> scores -> training -> analysis.

`dvc repro` runs the stages one by one (and skips those whose inputs did not change);
this flow is for running everything under one Prefect flow run, e.g. from a deployment.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from flows.analysis import analysis_flow
from flows.rollouts import rollouts_flow
from flows.scores import scores_flow
from flows.tasks import tasks_flow
from flows.training import training_flow


@flow(name="judgelab-pipeline")
def pipeline_flow(params: Path = Path("params.yaml")) -> Path:
    tasks = tasks_flow(params)
    rollouts = rollouts_flow(params, tasks)
    scores = scores_flow(params, tasks, rollouts)
    training = training_flow(params, tasks)
    return analysis_flow(params, tasks, rollouts, scores, training)
