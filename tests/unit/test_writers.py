"""Truth figures split by writer and by origin (analysis.writers): hand-computed cases, and
each split equal to the whole analysis run on that writer's candidates alone."""

from __future__ import annotations

import polars as pl

from judgelab.analysis.metrics import compute_metrics
from judgelab.analysis.stats import clean_json
from judgelab.analysis.writers import writer_blocks
from judgelab.config import AnalysisSettings
from judgelab.report.writers import writers_section
from judgelab.schemas import RolloutsSchema, ScoresSchema, TasksSchema, columns
from tests.unit.test_analysis import row

SETTINGS = AnalysisSettings(bootstrap=200, min_ci_groups=5)
# (task, candidate, writer, passes, judge score). Task A and B each: two natural samples of
# "qwen" (one passes, one fails), the reference and two mutants.
CANDIDATES = [
    ("A", "a-q1", "qwen", True, 0.6), ("A", "a-q2", "qwen", False, 0.7),
    ("A", "a-ref", "reference", True, 0.9), ("A", "a-flip", "operator_flip", False, 0.95),
    ("A", "a-obo", "off_by_one", False, 0.5),
    ("B", "b-q1", "qwen", True, 0.9), ("B", "b-q2", "qwen", False, 0.2),
    ("B", "b-ref", "reference", True, 0.8), ("B", "b-flip", "operator_flip", False, 0.3),
    ("B", "b-obo", "off_by_one", False, 0.3),
]  # fmt: skip


def tables(keep: set[str] | None = None) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    chosen = [c for c in CANDIDATES if keep is None or c[2] in keep]
    scores, rollouts = [], []
    for task, cid, writer, passes, judge in chosen:
        scores.append(row(task, cid, "tests", "execution", 1.0 if passes else 0.0))
        scores.append(row(task, cid, "judge", "ruler", judge))
        rollouts.append(
            {"task_id": task, "sample_index": len(rollouts), "candidate_id": cid,
             "policy": writer, "model_sha256": "imported", "seed": -1, "messages_json": "[]",
             "completion": cid, "finish_reason": None, "completion_tokens": 0,
             "latency_s": 0.0, "cache_key": ""}
        )  # fmt: skip
    tasks = pl.DataFrame(
        [
            {"task_id": t, "source": "files", "request": t, "prompt": t, "entry_point": None,
             "test": None, "canonical_solution": None}
            for t in sorted({c[0] for c in chosen})
        ],
        schema=columns(TasksSchema),
    )  # fmt: skip
    return (
        tasks,
        pl.DataFrame(rollouts, schema=columns(RolloutsSchema)),
        pl.DataFrame(scores, schema=columns(ScoresSchema)),
    )


def test_one_writer_adds_nothing_to_the_metrics() -> None:
    tasks, rollouts, scores = tables({"qwen"})
    assert writer_blocks(rollouts, scores, SETTINGS) == {}
    assert "writers" not in compute_metrics(tasks, rollouts, scores, SETTINGS)
    assert writers_section(compute_metrics(tasks, rollouts, scores, SETTINGS)) == []


def test_contrast_groups_apart_from_natural_rollouts_by_hand() -> None:
    tasks, rollouts, scores = tables()
    block = compute_metrics(tasks, rollouts, scores, SETTINGS)["writers"]
    contrast = block["by_origin"]["contrast"]
    assert contrast["writers"] == ["off_by_one", "operator_flip", "reference"]
    assert (contrast["n_candidates"], contrast["n_tasks"]) == (6, 2)
    judge = contrast["evaluators"]["judge"]
    # pairs (reference, mutant): A 0.9 < 0.95, 0.9 > 0.5; B 0.8 > 0.3, 0.8 > 0.3 -> 3 of 4
    assert judge["n_pairs"] == 4 and judge["pairwise_accuracy_strict"] == 0.75
    # failing scored >= 0.8: only A's operator_flip (0.95) of 4 mutants
    assert judge["false_praise_absolute"] == 0.25
    natural = block["by_origin"]["natural"]["evaluators"]["judge"]
    # A: 0.6 < 0.7 wrong; B: 0.9 > 0.2 right
    assert natural["n_pairs"] == 2 and natural["pairwise_accuracy_strict"] == 0.5
    flip = block["by_writer"]["operator_flip"]
    assert flip["origin"] == "contrast"
    # a writer whose candidates all fail: absolute figures only, no pairs
    assert flip["evaluators"]["judge"]["false_praise_absolute"] == 0.5
    assert flip["evaluators"]["judge"]["pairwise_accuracy_strict"] is None
    assert block["n_candidates_no_writer"] == 0


def test_each_split_is_the_analysis_of_that_subset_alone() -> None:
    _, rollouts, scores = tables()
    block = writer_blocks(rollouts, scores, SETTINGS)["writers"]
    for name, writers in (("qwen", {"qwen"}), ("reference", {"reference"})):
        alone = compute_metrics(*tables(writers), SETTINGS)["evaluators"]

        got = clean_json(block["by_writer"][name]["evaluators"])
        assert got == {ev: alone[ev]["truth"] for ev in alone}
    natural = compute_metrics(*tables({"qwen"}), SETTINGS)["evaluators"]["judge"]["truth"]
    assert clean_json(block["by_origin"]["natural"]["evaluators"]["judge"]) == natural


def test_the_report_section_shows_each_subset_with_its_n() -> None:
    metrics = compute_metrics(*tables(), SETTINGS)
    (section,) = writers_section(metrics)
    md = section.markdown
    line = next(x for x in md.splitlines() if x.startswith("| origin contrast | judge |"))
    # 2 mixed groups: below the minimum for a CI, so each value with its n
    assert "| 2 / 4 | 0.705 (n = 2)† | 0.750 (n = 2)† |" in line  # signal fidelity, strict
    assert "writer operator_flip" in md and "writer qwen" in md
    assert "<td>origin contrast</td>" in section.html


def test_the_headline_is_the_natural_population_and_contrast_a_named_secondary() -> None:
    """With contrast groups among the candidates, every headline figure (and the decision) is
    the natural candidates' alone, exactly what an audit of them alone gives, and the contrast
    candidates' figures are `known_truth`, exactly the contrast subset's."""
    tasks, rollouts, scores = tables()
    m = compute_metrics(tasks, rollouts, scores, SETTINGS, judged="apart")
    _, nat_rollouts, nat_scores = tables({"qwen"})
    alone = compute_metrics(tasks, nat_rollouts, nat_scores, SETTINGS)
    for name in ("judge", "tests"):
        assert m["evaluators"][name] == alone["evaluators"][name]
    assert m["power"] == alone["power"] and m["decision"] == alone["decision"]
    assert m["population"] == {"headline": "natural", "judged": "apart", "n_candidates": 4,
                               "n_tasks": 2}  # fmt: skip
    contrast = m["writers"]["by_origin"]["contrast"]
    assert m["known_truth"]["evaluators"] == contrast["evaluators"]
    assert m["known_truth"]["n_candidates"] == 6
    assert alone["population"]["headline"] == "all" and "known_truth" not in alone


def test_scores_stage_groups_each_population_apart_unless_asked() -> None:
    from judgelab.rollouts.generate import candidates_by_group, candidates_by_task

    _, rollouts, _ = tables()
    apart = candidates_by_group(rollouts, apart=True)
    assert {k: [c.candidate_id for c in v] for k, v in apart.items()} == {
        ("A", "natural"): ["a-q1", "a-q2"], ("A", "contrast"): ["a-ref", "a-flip", "a-obo"],
        ("B", "natural"): ["b-q1", "b-q2"], ("B", "contrast"): ["b-ref", "b-flip", "b-obo"],
    }  # fmt: skip
    together = candidates_by_group(rollouts, apart=False)
    assert list(together) == [("A", "all"), ("B", "all")]
    assert {t: [c.candidate_id for c in v] for t, v in candidates_by_task(rollouts).items()} == {
        t: [c.candidate_id for c in v] for (t, _), v in together.items()
    }
