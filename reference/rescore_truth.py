"""Re-score the committed reference audit's candidates with today's execution evaluator.

Reads reference/data/{tasks,rollouts,scores}, runs every candidate of a task with tests
through `ExecutionEvaluator` (judgelab.sandbox: tests in the trusted tester, only plain data
crossing) and compares each verdict with the committed execution row: the score, the outcome
and, where either changed, both reasons. Then the cost of strictness: every candidate that
passes the original tests, again with `tests: extended` (evaluators/extended.py), and which
of them fail the extra inputs, each with its reason. Writes reference/data/truth_rescore.json
(the counts, every changed verdict, every extended failure) and prints a summary. The scores
table is not touched: the audit's own re-run (`make reference`) is what replaces it.

    .venv/bin/python reference/rescore_truth.py [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from judgelab import hardware  # noqa: E402
from judgelab.config.evaluators import ExecutionSettings  # noqa: E402
from judgelab.evaluators.execution import ExecutionEvaluator  # noqa: E402
from judgelab.evaluators.extended import GENERATOR  # noqa: E402
from judgelab.verdicts import Candidate, Task  # noqa: E402

DATA = HERE / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    tasks = {r["task_id"]: r for r in pl.read_parquet(DATA / "tasks/tasks.parquet").to_dicts()}
    rollouts = pl.read_parquet(DATA / "rollouts/rollouts.parquet").to_dicts()
    scores = pl.read_parquet(DATA / "scores/scores.parquet").filter(
        (pl.col("protocol") == "execution") & (pl.col("repeat") == 0)
    )
    before = {r["candidate_id"]: r for r in scores.to_dicts()}
    (settings,) = [e for e in _evaluators() if e.get("kind") == "execution"]
    judge = ExecutionEvaluator(
        ExecutionSettings(**{k: v for k, v in settings.items() if k != "kind"})
    )
    pairs = []
    for row in rollouts:
        t = tasks[row["task_id"]]
        task = Task(task_id=t["task_id"], source=t["source"], prompt=t["prompt"],
                    entry_point=t["entry_point"], test=t["test"],
                    canonical_solution=t["canonical_solution"], request=t["request"])  # fmt: skip
        pairs.append((task, Candidate(row["task_id"], row["candidate_id"], row["sample_index"],
                                      row["completion"])))  # fmt: skip
    started = time.monotonic()
    verdicts = judge.score_many(pairs, workers=args.workers)
    elapsed = time.monotonic() - started
    changed, kinds = [], Counter()
    for (_, cand), new in zip(pairs, verdicts, strict=True):
        old = before.get(cand.candidate_id)
        if old is None:
            kinds["not in the committed table"] += 1
            continue
        if (old["score"], old["outcome"]) == (new.score, new.outcome):
            continue
        kind = f"{old['outcome']} -> {new.outcome}"
        kinds[kind] += 1
        changed.append({"candidate_id": cand.candidate_id, "task_id": cand.task_id,
                        "before": {"score": old["score"], "outcome": old["outcome"],
                                   "reason": old["reason"]},
                        "after": {"score": new.score, "outcome": new.outcome,
                                  "reason": new.reason}})  # fmt: skip
    strict = ExecutionEvaluator(judge.spec.model_copy(update={"tests": "extended"}))
    passing = [pair for pair, v in zip(pairs, verdicts, strict=True) if v.score == 1.0]
    started = time.monotonic()
    extended = strict.score_many(passing, workers=args.workers)
    strict_s = time.monotonic() - started
    failed = [
        {"candidate_id": cand.candidate_id, "task_id": cand.task_id, "reason": v.reason,
         "outcome": v.outcome}
        for (_, cand), v in zip(passing, extended, strict=True) if v.score != 1.0
    ]  # fmt: skip
    report = {
        "cpu": hardware.cpu_info().summary(),
        "candidates": len(pairs),
        "compared": len(pairs) - kinds["not in the committed table"],
        "changed": len(changed),
        "by_kind": dict(kinds),
        "seconds": round(elapsed, 1),
        "changes": changed,
        "extended": {
            "generator": GENERATOR,
            "inputs_per_task": strict.spec.extended_inputs,
            "passed_original": len(passing),
            "failed_extended": len(failed),
            "tasks_with_a_failure": len({f["task_id"] for f in failed}),
            "seconds": round(strict_s, 1),
            "failures": failed,
        },
    }
    (DATA / "truth_rescore.json").write_text(json.dumps(report, indent=2) + "\n")
    summary = {k: v for k, v in report.items() if k != "changes"}
    summary["extended"] = {k: v for k, v in report["extended"].items() if k != "failures"}
    print(json.dumps(summary, indent=2))
    for change in changed:
        print(change["candidate_id"], change["before"]["reason"], "->", change["after"]["reason"])


def _evaluators() -> list[dict]:
    import yaml

    params = yaml.safe_load((HERE / "params.yaml").read_text())
    found = params.get("scores", {}).get("evaluators", [])
    return [e for e in found if isinstance(e, dict)]


if __name__ == "__main__":
    main()
