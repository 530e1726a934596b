"""Would `tests: extended` be a fair truth? Its verdicts on the reference audit's candidates.

Three populations, each judged by the reference's execution evaluator with `tests: extended`
(evaluators/extended.py, within the contracts of evaluators/contracts.py):

- `passing`: every candidate of the committed audit whose execution score is 1 (the original
  tests pass: 346). Each one that fails the extra inputs is listed with its reason: a verdict
  that would change if `extended` were the truth, to be classified by hand (docs/SECURITY.md).
- `lookup`: per task, a lookup table of its public tests (`candidate(args) == literal`): it
  passes the original tests wherever they are all literal; each must fail the extended ones.
- `mutants`: per task, the first `--per-kind` single-site mutants of its reference of each
  kind (`judgelab.rollouts.perturb.mutants`); those that pass the original tests are run
  with the extended ones, and each that still passes is listed. With `--deep N` those are run
  again with N extra inputs per task (the same contracts): one that fails then is wrong code
  that 30 inputs miss; one that passes N is listed for reading (an equivalent mutant, or one
  the contracts exclude the difference of).

Writes reference/data/extended_truth.json and prints the summary and every listed row. The
scores table is not touched.

    .venv/bin/python reference/extended_truth.py [--workers 2] [--per-kind 2] [--deep 1000]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path

import polars as pl
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from judgelab import hardware  # noqa: E402
from judgelab.config import MUTANT_KINDS  # noqa: E402
from judgelab.config.evaluators import ExecutionSettings  # noqa: E402
from judgelab.evaluators.execution import ExecutionEvaluator  # noqa: E402
from judgelab.evaluators.extended import GENERATOR  # noqa: E402
from judgelab.rollouts.contrast import canonical_source  # noqa: E402
from judgelab.rollouts.perturb import answer, mutants  # noqa: E402
from judgelab.tasks import tasks_from_frame  # noqa: E402
from judgelab.verdicts import Candidate, Task  # noqa: E402

DATA = HERE / "data"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--per-kind", type=int, default=2, help="mutants per kind per task")
    parser.add_argument("--deep", type=int, default=0, help="extra inputs for the survivors")
    parser.add_argument("--inputs", type=int, default=None, help="extended_inputs (default: its)")
    parser.add_argument("--only-passing", action="store_true", help="skip lookups and mutants")
    args = parser.parse_args()
    tasks = {t.task_id: t for t in tasks_from_frame(pl.read_parquet(DATA / "tasks/tasks.parquet"))}
    params = yaml.safe_load((HERE / "params.yaml").read_text())
    (spec,) = [e for e in params["scores"]["evaluators"] if e.get("kind") == "execution"]
    original = ExecutionEvaluator(
        ExecutionSettings(**{k: v for k, v in spec.items() if k != "kind"} | {"tests": "original"})
    )
    update = {"tests": "extended"} | ({"extended_inputs": args.inputs} if args.inputs else {})
    strict = ExecutionEvaluator(original.spec.model_copy(update=update))
    started = time.monotonic()
    passing = _passing(tasks)
    verdicts = strict.score_many(passing, workers=args.workers)
    failures = [_row(c, v) for (_, c), v in zip(passing, verdicts, strict=True) if v.score != 1.0]
    lookups = [] if args.only_passing else _lookups(tasks)
    lookup = _caught(original, strict, lookups, args.workers)
    mutant = _caught(original, strict, [] if args.only_passing else _mutants(tasks, args.per_kind),
                     args.workers)  # fmt: skip
    if args.deep:
        deep = ExecutionEvaluator(strict.spec.model_copy(update={"extended_inputs": args.deep}))
        mutant["deep"] = _deeper(deep, tasks, mutant["passed_extended"], args)
    report = {
        "cpu": hardware.cpu_info().summary(),
        "generator": GENERATOR,
        "inputs_per_task": strict.spec.extended_inputs,
        "seconds": round(time.monotonic() - started, 1),
        "passing": {"candidates": len(passing), "failed_extended": len(failures),
                    "failures": failures},
        "lookup": lookup,
        "mutants": mutant,
    }  # fmt: skip
    (DATA / "extended_truth.json").write_text(json.dumps(report, indent=2) + "\n")
    for name in ("passing", "lookup", "mutants"):
        counts = {k: v for k, v in report[name].items() if not isinstance(v, list)}
        print(name, json.dumps(counts))
    for row in failures:
        print(f"| {row['task_id']} | {row['candidate_id']} | {row['reason']} |")
    for row in lookup["passed_extended"] + mutant["passed_extended"]:
        print("passed extended:", row["task_id"], row["candidate_id"])
    for row in mutant.get("deep", {}).get("failed", []):
        print("failed deep:", row["candidate_id"], row["reason"])


def _passing(tasks: dict[str, Task]) -> list[tuple[Task, Candidate]]:
    """The committed audit's candidates whose execution score (repeat 0) is 1."""
    scores = pl.read_parquet(DATA / "scores/scores.parquet").filter(
        (pl.col("protocol") == "execution") & (pl.col("repeat") == 0) & (pl.col("score") == 1.0)
    )
    ids = set(scores["candidate_id"])
    rollouts = pl.read_parquet(DATA / "rollouts/rollouts.parquet").filter(
        pl.col("candidate_id").is_in(ids)
    )
    return [(tasks[r["task_id"]], Candidate(r["task_id"], r["candidate_id"], r["sample_index"],
                                            r["completion"]))
            for r in rollouts.iter_rows(named=True)]  # fmt: skip


def _lookups(tasks: dict[str, Task]) -> list[tuple[Task, Candidate]]:
    """Per task, a candidate that answers the public tests from a table and nothing else."""
    out = []
    for task in tasks.values():
        table = _public_answers(task.test or "")
        if not table or not task.entry_point:
            continue
        code = (f"TABLE = {table!r}\n"
                f"def {task.entry_point}(*args):\n"
                "    return TABLE.get(repr(args))\n")  # fmt: skip
        cand = Candidate(task.task_id, f"lookup:{task.task_id}", 0, answer(task.prompt, code))
        out.append((task, cand))
    return out


def _public_answers(test: str) -> dict[str, object]:
    table: dict[str, object] = {}
    for node in ast.walk(ast.parse(test)):
        if not (isinstance(node, ast.Compare) and len(node.comparators) == 1):
            continue
        call = node.left
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "candidate":
            try:
                key = repr(tuple(ast.literal_eval(a) for a in call.args))
                table[key] = ast.literal_eval(node.comparators[0])
            except (ValueError, SyntaxError, TypeError):
                continue
    return table


def _mutants(tasks: dict[str, Task], per_kind: int) -> list[tuple[Task, Candidate]]:
    out = []
    for task in tasks.values():
        if not (task.test and task.entry_point and task.canonical_solution):
            continue
        source = canonical_source(task)
        for kind in MUTANT_KINDS:
            for i, code in zip(range(per_kind), mutants(source, task.entry_point, kind),
                               strict=False):  # fmt: skip
                cid = f"{kind}:{i}:{task.task_id}"
                out.append((task, Candidate(task.task_id, cid, 0, answer(task.prompt, code))))
    return out


def _caught(
    original: ExecutionEvaluator,
    strict: ExecutionEvaluator,
    pairs: list[tuple[Task, Candidate]],
    workers: int,
) -> dict[str, object]:
    """How many of `pairs` pass the original tests, and which of those pass the extended."""
    first = original.score_many(pairs, workers=workers)
    passed = [p for p, v in zip(pairs, first, strict=True) if v.score == 1.0]
    second = strict.score_many(passed, workers=workers)
    slipped = [_row(c, v) for (_, c), v in zip(passed, second, strict=True) if v.score == 1.0]
    return {"candidates": len(pairs), "passed_original": len(passed),
            "failed_extended": len(passed) - len(slipped), "passed_extended": slipped}  # fmt: skip


def _deeper(
    deep: ExecutionEvaluator, tasks: dict[str, Task], rows: list, args: argparse.Namespace
) -> dict[str, object]:
    """The survivors again, with `--deep` extra inputs: which fail now, which still pass."""
    wanted = {r["candidate_id"] for r in rows}
    pairs = [p for p in _mutants(tasks, args.per_kind) if p[1].candidate_id in wanted]
    verdicts = deep.score_many(pairs, workers=args.workers)
    rows = [_row(c, v) for (_, c), v in zip(pairs, verdicts, strict=True)]
    return {"inputs_per_task": args.deep,
            "failed": [r for r in rows if r["outcome"] != "passed"],
            "passed": [r["candidate_id"] for r in rows if r["outcome"] == "passed"]}  # fmt: skip


def _row(cand: Candidate, verdict: object) -> dict[str, object]:
    return {"task_id": cand.task_id, "candidate_id": cand.candidate_id,
            "outcome": verdict.outcome, "reason": verdict.reason}  # type: ignore[attr-defined]  # fmt: skip


if __name__ == "__main__":
    main()
