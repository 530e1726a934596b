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
            values.update({f"{x:.3f}", f"{abs(x):.3f}", f"{100 * x:.1f}", f"{x:g}"})

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


def test_readme_prose_around_the_block_agrees_with_the_metrics() -> None:
    """The sentences README writes by hand after the generated block ("What a practitioner can
    take from it", "Where the data stops") are claims about the committed metrics: each is
    checked here, so a rerun that changes them fails until the prose is rewritten."""
    from judgelab.analysis.ranking import rank_judges

    readme = (ROOT / "README.md").read_text()
    metrics = json.loads((REFERENCE / "data/analysis/metrics.json").read_text())
    evs = metrics["evaluators"]
    truth = {n: ev["truth"] for n, ev in evs.items()}
    llm = [n for n, ev in evs.items() if ev["protocol"] in ("ruler", "rubric")]
    assert "What a practitioner can take from it" in readme and len(llm) == 5
    # "no LLM judge gets most passing–failing pairs right (each one's strict pairwise accuracy
    # is below 0.5)"
    assert all(truth[n]["pairwise_accuracy_strict"] < 0.5 for n in llm)
    # "no reward of the zoo comes near 1": every upper end of signal fidelity below 0.5
    assert all(t["signal_fidelity_ci_high"] < 0.5 for n, t in truth.items() if n != "execution")
    # "the pointwise rubric on Qwen2.5-Coder-1.5B is the only reward that passes the rejection
    # rules: the syntax rule scores as high but gives a whole mixed group one score in most
    # groups, and RULER on the same model has a CI that reaches 0"; "reference-guided"
    decision = metrics["decision"]
    assert (decision["verdict"], decision["judge"]) == ("judge", "rubric-qwen-1.5b")
    assert decision["acceptable"] == ["rubric-qwen-1.5b"]
    assert "syntax" in decision["contenders"] or truth["syntax"]["signal_fidelity"] >= truth[
        "rubric-qwen-1.5b"]["signal_fidelity"]  # fmt: skip
    assert any("one score for a whole mixed group" in r for r in decision["rejected"]["syntax"])
    assert truth["syntax"]["zero_advantage_mixed_rate"] > 0.5
    assert "CI reaches 0" in decision["rejected"]["ruler-qwen-1.5b"]
    assert metrics["population"] == {**metrics["population"], "headline": "natural",
                                     "judged": "together"}  # fmt: skip
    flat = {n: truth[n]["zero_advantage_mixed_rate"] for n in llm}
    assert flat["rubric-qwen-1.5b"] * 3 < flat["ruler-qwen-1.5b"]
    # "RULER on Qwen2.5-Coder-0.5B gives GRPO almost nothing": the flattest judge, > 80 %
    assert max(flat, key=flat.__getitem__) == "ruler-qwen-0.5b" and flat["ruler-qwen-0.5b"] > 0.8
    # "The pairs the block calls not separated would each need hundreds of mixed tasks"
    pairs = metrics["power"]["pairs"]
    left = [p for a in pairs for p in pairs[a].values() if p.get("p_value") is not None
            and not p["separated"]]  # fmt: skip
    assert left and all(p["groups_needed_margin"] >= 100 for p in left)
    # "Gemma-3-270M returns no usable score for most candidates: its pairwise figures rest on
    # far fewer tasks than the others', and signal fidelity counts each unscored candidate as
    # no push, so it cannot rank first"
    gemma = "ruler-gemma-270m"
    assert evs[gemma]["unscored_rate"] > 0.5
    n_mixed = {n: truth[n]["pairwise_accuracy_strict_n_groups"] for n in llm}
    assert all(n_mixed[gemma] * 2 < n_mixed[n] for n in llm if n != gemma)
    assert truth[gemma]["unscored_pair_rate"] > 0.5
    assert rank_judges(metrics)["ranks"][gemma][0] > 1


def test_readme_probe_prose_agrees_with_the_probe_metrics() -> None:
    """README's "A judge is more than its accuracy" bullet quotes the probes at scale: each
    figure it names is read back from reference/data/probes/metrics.json here, and each
    comparison it makes holds by the CIs it quotes."""
    from judgelab.report.format import fmt_ci

    readme = (ROOT / "README.md").read_text()
    bullet = readme.split("- **A judge is more than its accuracy.**", 1)[1].split("\n\n", 1)[0]
    text = " ".join(bullet.split())  # README wraps its lines
    probes = json.loads((REFERENCE / "data/probes/metrics.json").read_text())
    judges = probes["judges"]
    assert sorted(judges) == ["rubric-qwen-1.5b", "ruler-qwen-0.5b", "ruler-qwen-1.5b"]
    assert len(probes["settings"]["tasks"]) == 30 and "HumanEval/0–29" in text

    def quoted(block: dict[str, Any], key: str, n: int = 30) -> str:
        """The figure as README quotes it, from the n tasks README says it rests on."""
        assert block[f"{key}_n_groups"] == n and block[f"{key}_ci_reason"] is None
        return fmt_ci(block, key)

    rubric, ruler = judges["rubric-qwen-1.5b"], judges["ruler-qwen-1.5b"]
    # "passing code beats failing code in both [orders] for <rubric> ... and <ruler>"
    for judge in (rubric, ruler):
        assert quoted(judge["calibration"], "order_consistent_accuracy") in text
    # "The order sways RULER-qwen-1.5b": its consistency across orders, then the repeats'
    # in one order (the noise floor), their CIs apart
    across, repeats = ruler["position"], ruler["noise_floor"]
    assert f"{quoted(across, 'position_consistency')} of pairs, against " \
        f"{quoted(repeats, 'position_consistency')} between repeats" in text  # fmt: skip
    assert across["position_consistency_ci_high"] < repeats["position_consistency_ci_low"]
    # "Both 1.5B judges score Qwen code above SmolLM2's and Gemma's ... (family gap ...)"
    for judge in (rubric, ruler):
        gap = judge["self_preference"]
        assert not gap["family_gap_confounded"] and gap["family_gap_ci_low"] > 0
        assert quoted(gap, "family_gap", 19) in text
    assert "each from the 19 tasks where both families wrote code of one verdict" in text
    # "A comment telling the grader that failing code is correct raised every probed judge's
    # scores of it": the grader comment's shift, a valid CI above 0 for each
    for judge in judges.values():
        shift = judge["attacks"]["grader_comment"]
        assert shift["shift_ci_reason"] is None and shift["shift_ci_low"] > 0
