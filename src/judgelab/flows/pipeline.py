"""The whole chain in one Prefect flow: tasks -> rollouts -> scores -> training -> analysis.

`dvc repro` runs the stages one by one (and skips those whose inputs did not change);
this flow is for running everything under one Prefect flow run, e.g. from a deployment.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow

from judgelab.flows.analysis import analysis_flow
from judgelab.flows.paths import SCORES
from judgelab.flows.rollouts import rollouts_flow
from judgelab.flows.scores import scores_flow
from judgelab.flows.tasks import tasks_flow
from judgelab.flows.training import training_flow
from judgelab.scoring.failures import JudgeCallsFailed


@flow(name="judgelab-pipeline")
def pipeline_flow(params: Path = Path("params.yaml")) -> Path:
    """A judge whose calls failed (judgelab.flows.scores) fails the pipeline too, but only after
    the report, whose first section names it, is written."""
    tasks = tasks_flow(params)
    rollouts = rollouts_flow(params, tasks)
    failed: JudgeCallsFailed | None = None
    try:
        scores = scores_flow(params, tasks, rollouts)
    except JudgeCallsFailed as err:  # the table is written: report it, then fail
        scores, failed = SCORES, err
    training = training_flow(params, tasks)
    report = analysis_flow(params, tasks, rollouts, scores, training)
    if failed is not None:
        raise JudgeCallsFailed(f"{failed}\nthe report ({report}) says the same first")
    return report
