"""The committed reference audit (reference/, `make reference`) is what the code says it is.

reference/dvc.lock names the stages that have run and the md5 of each output they wrote. The
tables are committed (cache: false), so on a clean clone each one must be the file DVC
recorded, validate against its schema, and the analysis run on them must reproduce the
committed metrics.json exactly. No model runs here: CI never reruns the reference.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from judgelab.analysis.recheck import read_baseline
from judgelab.config import load_settings
from judgelab.report.outputs import run_analysis
from judgelab.schemas import validate_file

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "reference"
LOCK = REFERENCE / "dvc.lock"

# The schema of every committed table, by its path under reference/.
TABLES = {
    "data/tasks/tasks.parquet": "tasks",
    "data/rollouts/rollouts.parquet": "rollouts",
    "data/scores/scores.parquet": "scores",
    "data/probes/candidates.parquet": "probe_candidates",
    "data/probes/probe_scores.parquet": "probe_scores",
    "data/probes/calls.parquet": "probe_calls",
}


def locked_outputs() -> dict[str, dict[str, Any]]:
    """path -> its dvc.lock entry, for every output of every stage that has run."""
    stages = yaml.safe_load(LOCK.read_text())["stages"]
    return {out["path"]: out for body in stages.values() for out in body.get("outs", [])}


def test_the_audit_has_run_and_is_committed() -> None:
    outputs = locked_outputs()
    for path in ("data/tasks/tasks.parquet", "data/rollouts/rollouts.parquet"):
        assert path in outputs, f"reference/dvc.lock has no {path}: run `make reference`"
    assert "data/scores/scores.parquet" in outputs


@pytest.mark.parametrize("path", sorted(locked_outputs()))
def test_each_output_is_the_file_dvc_recorded(path: str) -> None:
    entry = locked_outputs()[path]
    target = REFERENCE / path
    assert target.exists(), f"reference/{path} is in dvc.lock but not committed"
    if entry["md5"].endswith(".dir"):  # a folder: its files are checked by what reads them
        assert target.is_dir() and any(target.iterdir())
        return
    assert hashlib.md5(target.read_bytes()).hexdigest() == entry["md5"], path
    assert target.stat().st_size == entry["size"]


@pytest.mark.parametrize("path", sorted(TABLES))
def test_committed_tables_validate(path: str) -> None:
    if path not in locked_outputs():
        pytest.skip(f"reference/{path}: its stage has not run yet (reference/dvc.lock)")
    frame = validate_file(REFERENCE / path, TABLES[path])
    assert frame.height > 0


def test_scores_are_the_audit_the_params_ask_for() -> None:
    """The HumanEval problems the params name (at least 30), every task a group of k policy
    samples (and its contrast group where the params join one), every candidate scored once
    by every evaluator."""
    settings = load_settings(REFERENCE / "params.yaml")
    scores = validate_file(REFERENCE / "data/scores/scores.parquet", "scores")
    tasks = validate_file(REFERENCE / "data/tasks/tasks.parquet", "tasks")
    rollouts = validate_file(REFERENCE / "data/rollouts/rollouts.parquet", "rollouts")
    humaneval = settings.tasks.humaneval
    wanted = 164 - humaneval.offset if humaneval.limit == "all" else humaneval.limit
    assert tasks.filter(tasks["source"] == "humaneval").height == wanted >= 30
    sampled = rollouts.filter(rollouts["policy"].is_in(settings.rollouts.writers))
    assert sampled.group_by("task_id").len()["len"].unique().to_list() == [settings.rollouts.k]
    assert sorted(rollouts["task_id"].unique()) == sorted(tasks["task_id"])
    names = sorted(ev.name for ev in settings.scores.evaluators)
    assert sorted(scores["evaluator"].unique().to_list()) == names
    per_evaluator = scores.group_by("evaluator").len()["len"].unique().to_list()
    assert per_evaluator == [rollouts.height * settings.scores.repeats]


def test_each_group_judge_call_saw_one_population() -> None:
    """Issue 46: the reference is judged as GRPO judges, each task's policy samples in a call
    of their own and its known-truth contrast group in another. Every row of a group judge
    records its call's candidate order (`permutation`), so a call's size is on every row: it
    must be the size of the row's own population in its task, never both together."""
    settings = load_settings(REFERENCE / "params.yaml")
    assert settings.scores.populations == "apart"
    rollouts = validate_file(REFERENCE / "data/rollouts/rollouts.parquet", "rollouts")
    natural = rollouts.select(
        "candidate_id", pl.col("policy").is_in(settings.rollouts.writers).alias("natural")
    )
    group = ["evaluator", "task_id", "repeat", "natural"]
    ruler = (
        validate_file(REFERENCE / "data/scores/scores.parquet", "scores")
        .filter(pl.col("protocol") == "ruler")
        .join(natural, on="candidate_id", how="left", validate="m:1")
        .with_columns(
            pl.len().over(group).alias("size"),
            (pl.col("permutation").str.count_matches(",") + 1).alias("call_size"),
        )
    )
    assert ruler.height > 0 and ruler["natural"].null_count() == 0
    assert ruler["permutation"].null_count() == 0
    mixed = ruler.filter(pl.col("call_size") != pl.col("size"))
    assert mixed.is_empty(), mixed.select(*group, "size", "call_size").unique().head(5)
    assert ruler.group_by(group).agg(pl.col("permutation").n_unique())["permutation"].max() == 1
    # both populations were judged, by every group judge
    assert ruler.group_by("evaluator").agg(pl.col("natural").n_unique())["natural"].min() == 2


def test_the_analysis_of_the_committed_tables_is_the_committed_metrics(tmp_path: Path) -> None:
    committed = REFERENCE / "data/analysis/metrics.json"
    if not committed.exists():
        pytest.skip("the reference analysis has not run yet")
    settings = load_settings(REFERENCE / "params.yaml")
    baseline = settings.analysis.truth_baseline  # the truth re-check against earlier verdicts
    data = REFERENCE / "data"
    metrics = run_analysis(
        validate_file(data / "tasks/tasks.parquet", "tasks"),
        validate_file(data / "rollouts/rollouts.parquet", "rollouts"),
        validate_file(data / "scores/scores.parquet", "scores"),
        settings.analysis,
        tmp_path,
        training_dir=data / "training",
        probes_metrics=data / "probes/metrics.json",
        train_rewards=settings.train.rewards,
        truth_baseline=read_baseline(REFERENCE / baseline) if baseline else None,
        judged=settings.scores.populations,
        alarm_alpha=settings.train.alarm_alpha,
    )
    assert (tmp_path / "metrics.json").read_text() == committed.read_text()
    assert metrics == json.loads(committed.read_text())


def test_readme_opens_with_the_committed_findings() -> None:
    """README's findings block (compact table and four bullets) is the one the committed
    metrics give (report.headline), and so is docs/REFERENCE_AUDIT.md."""
    from judgelab.report.headline import AUDIT_DOC, BEGIN, END, audit_document, findings_block

    readme = (ROOT / "README.md").read_text()
    assert BEGIN in readme and END in readme, "README lacks the reference findings block"
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    regen = "run `python -m judgelab.report.headline reference/data --write`"
    assert block.strip() == findings_block(REFERENCE / "data").strip(), regen
    assert (ROOT / AUDIT_DOC).read_text() == audit_document(REFERENCE / "data"), regen
    # on README's first pages: after the two commands and the quick start, before the rest
    assert readme.index("## Audit your own judge\n") < readme.index(BEGIN)
    assert readme.index(BEGIN) < readme.index("## Limitations")


def test_every_figure_in_the_readme_block_is_in_the_metrics() -> None:
    """Each number of README's block is a figure of metrics.json (the audit's, or the probes'
    for the attack finding) as rounded there, or a count/n it states: nothing typed by hand."""
    import re

    from judgelab.report.headline import BEGIN, END

    metrics = json.loads((REFERENCE / "data/analysis/metrics.json").read_text())
    values: set[str] = set()

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, bool) or x is None or isinstance(x, str):
            return
        elif isinstance(x, int):
            values.add(str(x))
        elif isinstance(x, float):
            # a rate as the report writes it: 0.123, 12.3 (%), and a rule's threshold (50 %)
            values.update({f"{x:.3f}", f"{abs(x):.3f}", f"{100 * x:.1f}", f"{x:g}", f"{100 * x:g}"})

    walk(metrics)
    walk(json.loads((REFERENCE / "data/probes/metrics.json").read_text()))

    def study_walk(x: Any) -> None:  # the study's figures as report/prediction writes them
        if isinstance(x, dict | list):
            for v in x.values() if isinstance(x, dict) else x:
                study_walk(v)
        elif isinstance(x, float):
            values.update({f"{x:.3g}", f"{x:.2f}", f"{x:.3f}"})
        elif isinstance(x, int) and not isinstance(x, bool):
            values.add(str(x))

    for name in ("prediction.json", "effects.json"):
        study_walk(json.loads((REFERENCE / "data/study" / name).read_text()))
    block = (ROOT / "README.md").read_text().split(BEGIN, 1)[1].split(END, 1)[0]
    block = block.replace("docs/REFERENCE_AUDIT.md", "")
    # numbers, not the digits of a name (ruler-qwen-1.5b, smollm2-135m)
    numbers = re.findall(r"(?<![\w.-])[+-]?\d+(?:\.\d+)?(?![\w-]|\.\d)", block)
    missing = {n for n in numbers if n.lstrip("+-") not in values and n not in values}
    assert not missing - {"1", "2", "3", "4", "5", "6", "7"}, sorted(missing)  # ranks 1..7


def test_readme_reads_the_findings_with_the_committed_figures() -> None:
    """README's practitioner bullets after the block are generated from the committed
    metrics (`report.practice`; tests/unit/test_practice.py holds each sentence to its
    condition), so a rerun that no longer supports one rewrites or drops it."""
    from judgelab.report.practice import BEGIN, END, practice_block

    readme = (ROOT / "README.md").read_text()
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0]
    analysis = json.loads((REFERENCE / "data/analysis/metrics.json").read_text())
    probes = json.loads((REFERENCE / "data/probes/metrics.json").read_text())
    regen = "run `python -m judgelab.report.headline reference/data --write`"
    assert block.strip() == practice_block(analysis, probes).strip(), regen
    assert "What a practitioner can take from it" in block
    assert readme.index("<!-- reference-findings:end -->") < readme.index(BEGIN)
