"""probes stage: bias probes of the configured judges -> data/probes/ (tables, metrics, report).

Known-truth, self-preference, perturbed and attacked groups are built from the tasks named in
probes.tasks (HumanEval, CodeI/O, your files: judgelab.tasks.registry.tasks_by_id) and the zoo
policies, then every probed judge scores every view through the scores stage's evaluator code;
what each call cost goes to calls.parquet. Judge calls are cached, so an interrupted run
resumes where it stopped. The gate (probes.fail_above) is the CLI's, after the flow.
`reanalyse` recomputes the figures and the report from the tables a run wrote, calling no
model (`judgelab probes --reanalyse`: after an upgrade of the analysis).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from prefect import flow, get_run_logger, task

from judgelab.analysis.cost import judge_costing
from judgelab.analysis.probes import probe_ci_rule
from judgelab.cache import JsonCache
from judgelab.config import Settings, load_settings
from judgelab.evaluators.base import Evaluator
from judgelab.evaluators.registry import build_evaluator
from judgelab.flows.fanout import UNIT_TASK, Lanes, Unit, fan_out
from judgelab.flows.paths import PROBES
from judgelab.io import write_parquet
from judgelab.models.server import serve
from judgelab.paths import cache_dir, project_root
from judgelab.probes.calls import calls_frame, record_calls
from judgelab.probes.design import ProbeGroup, View
from judgelab.probes.run import (
    ProbeJudge,
    candidates_frame,
    judge_models,
    plan,
    policy_samples,
    probe_scores_frame,
    probe_specs,
    require_judges,
    run_id_for,
    score_view,
)
from judgelab.report.probes import run_probe_analysis
from judgelab.rollouts.contrast import execution_check
from judgelab.schemas import validate_file
from judgelab.tasks.registry import tasks_by_id


@task(name="probe-view", **UNIT_TASK)
def probe_view_task(
    run_id: str, evaluator: Evaluator, family: str, group: ProbeGroup, view: View
) -> tuple[list[dict], list[dict]]:
    """The view's score rows and the rows of the judge calls it made (probe calls table)."""
    recording = record_calls(evaluator, group.group_id, view.name, view.repeat)
    return score_view(run_id, recording, family, group, view), recording.calls


@flow(name="judgelab-probe")
def probe_flow(params: Path = Path("params.yaml"), out: Path = PROBES) -> Path:
    settings = load_settings(params)
    require_judges(settings)
    logger = get_run_logger()
    tasks = tasks_by_id(settings.tasks, project_root(), settings.probes.tasks, "probes.tasks")
    check = execution_check(settings.test_runner())
    specs = probe_specs(settings)
    families = judge_models(settings)
    judge_cache = JsonCache(cache_dir(), "judge", settings.cache.seed_dirs())
    models = settings.models_called("probes")
    with serve(settings, models) as endpoints:
        completions = JsonCache(cache_dir(), "completions", settings.cache.seed_dirs())
        groups, views = plan(
            settings, tasks, check, lambda ts: policy_samples(settings, ts, endpoints, completions)
        )
        run_id = run_id_for(settings, groups)
        lanes = Lanes(settings, models)
        units = []
        for spec in specs:  # judge-major: the embedded server swaps models once per judge
            judge = ProbeJudge(
                spec, settings.probes, lambda s: build_evaluator(s, endpoints, judge_cache)
            )
            family = families[spec.name][1]
            units += [
                Unit(lanes.of(spec.judge_model),
                     {"run_id": run_id, "evaluator": judge.for_view(v), "family": family,
                      "group": g, "view": v},
                     f"{spec.name}: {g.group_id} {v.name} r{v.repeat}")
                for g in groups
                for v in views[g.group_id]
            ]  # fmt: skip
        results = fan_out(probe_view_task, units, lanes.limits, stage="probe", unit="view")
    rows = [row for view_rows, _ in results for row in view_rows]
    calls = [call for _, view_calls in results for call in view_calls]
    out = Path(out)
    candidates = candidates_frame(groups, views)
    scores = probe_scores_frame(rows)
    write_parquet(out / "candidates.parquet", candidates)
    write_parquet(out / "probe_scores.parquet", scores)
    call_frame = calls_frame(calls)
    write_parquet(out / "calls.parquet", call_frame)
    analyse(settings, candidates, scores, call_frame, out)
    logger.info("probes: %d rows (run %s) -> %s", scores.height, run_id, out)
    return out


def analyse(
    settings: Settings, candidates: pl.DataFrame, scores: pl.DataFrame, calls: pl.DataFrame,
    out: Path,
) -> None:  # fmt: skip
    """The figures, plots and report of a probe run's tables, under `out`."""
    run_probe_analysis(
        candidates, scores, settings.probes, judge_models(settings), out,
        rule=probe_ci_rule(settings.analysis, settings.probes),
        calls=calls, costing=judge_costing(settings),
    )  # fmt: skip


def reanalyse(params: Path = Path("params.yaml"), out: Path = PROBES) -> Path:
    """`analyse` the tables an earlier run wrote under `out` (validated), calling no model."""
    settings = load_settings(params)
    require_judges(settings)
    out = Path(out)
    candidates, scores, calls = (
        validate_file(out / f"{name}.parquet", schema)
        for name, schema in (("candidates", "probe_candidates"),
                             ("probe_scores", "probe_scores"), ("calls", "probe_calls"))
    )  # fmt: skip
    analyse(settings, candidates, scores, calls, out)
    return out
