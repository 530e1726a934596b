"""Known-truth contrast groups: candidates whose truth is known without sampling a policy.

For a task with a reference solution (HumanEval's canonical solution, CodeI/O's reference
code), its group is the reference and k - 1 single-site mutants of it that the sandbox proved
to fail the task's tests (the probes' mutant machinery, `judgelab.rollouts.perturb.mutants`),
or k - 2 of them and a non-answer. They cost no policy sampling, so they give hard negatives
cheaply: a judge that cannot tell the reference from a one-token mutant shows it here.

Each candidate names its writer (`policy`): ``reference``, the mutant kind
(``operator_flip``, ...) or ``non_answer``. The rows are what `rollouts.candidates` imports
(docs/TASKS.md), so the groups enter the rollouts and scores tables like any imported
candidates, writer named. A task whose reference does not pass its own tests, or that has
too few mutants its tests reject, gets no group: it is listed with the reason.

    python -m judgelab.rollouts.contrast data/tasks/tasks.parquet inputs/contrast.jsonl --k 4
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from judgelab.config import MUTANT_KINDS, ExecutionSettings
from judgelab.config.evaluators import DEFAULT_EXECUTION
from judgelab.errors import ConfigError
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.io import write_text
from judgelab.rollouts.origins import NON_ANSWER_WRITER, REFERENCE
from judgelab.rollouts.perturb import NON_ANSWER, answer, mutants
from judgelab.tasks.testing import defines_function
from judgelab.verdicts import Candidate, Task

log = logging.getLogger(__name__)

Check = Callable[[Task, str], "bool | None"]


@dataclass(frozen=True)
class Skipped:
    task_id: str
    reason: str


def canonical_source(task: Task) -> str:
    """The task's canonical solution as one normalised program (docstring kept): a body
    (HumanEval's) under the prompt's stub, a whole program (CodeI/O's reference) as it is,
    the rule the execution evaluator applies to candidates."""
    if not task.canonical_solution or not task.entry_point:
        raise ConfigError(
            f"probes.tasks: {task.task_id} has no canonical solution to build a known-truth group"
        )
    code = task.canonical_solution
    if not defines_function(code, task.entry_point):  # a body (HumanEval's): under its stub
        code = task.prompt + code
    return ast.unparse(ast.parse(code))


def execution_check(spec: ExecutionSettings | None = None) -> Check:
    """The execution evaluator as a check: True pass, False fail, None no verdict."""
    judge = ExecutionEvaluator(spec or DEFAULT_EXECUTION)

    def check(task: Task, completion: str) -> bool | None:
        cand = Candidate(task.task_id, "probe-check", 0, completion)
        [verdict] = judge.score_group(task, [cand])
        return None if verdict.status != "scored" else verdict.score == 1.0

    return check


def contrast_group(
    task: Task,
    k: int,
    check: Check,
    kinds: Sequence[str] = MUTANT_KINDS,
    non_answer: bool = False,
    seed: int = 0,
) -> list[dict[str, str]] | Skipped:
    """The task's group as candidate rows ({task_id, policy, completion}) in a seeded order,
    or why it has none. Mutants are taken round-robin over `kinds`, each in source order, and
    kept only when the sandbox says they fail (a mutant it cannot judge is passed over)."""
    if k < 2 or (non_answer and k < 3):
        raise ConfigError(
            f"contrast groups: k = {k} leaves no mutant (k >= 2, >= 3 with a non-answer)"
        )
    if not task.test or not task.entry_point or not task.canonical_solution:
        return Skipped(task.task_id, "no tests or no reference solution")
    request = task.request or task.prompt
    source = canonical_source(task)
    reference = answer(request, source)
    if check(task, reference) is not True:
        return Skipped(task.task_id, "the reference does not pass its own tests")
    wanted = k - 1 - int(non_answer)
    pools = {kind: mutants(source, task.entry_point, kind) for kind in kinds}
    chosen: list[tuple[str, str]] = []
    while pools and len(chosen) < wanted:
        for kind in list(pools):
            code = next(pools[kind], None)
            if code is None:
                del pools[kind]
                continue
            completion = answer(request, code)
            if check(task, completion) is False:
                chosen.append((kind, completion))
                if len(chosen) == wanted:
                    break
    if len(chosen) < wanted:
        return Skipped(task.task_id, f"{len(chosen)} mutants fail its tests, {wanted} needed")
    members = [(REFERENCE, reference), *chosen]
    if non_answer:
        members.append((NON_ANSWER_WRITER, NON_ANSWER))
    random.Random(f"contrast/{seed}/{task.task_id}").shuffle(members)
    return [{"task_id": task.task_id, "policy": w, "completion": c} for w, c in members]


def contrast_groups(
    tasks: Sequence[Task],
    k: int,
    check: Check,
    kinds: Sequence[str] = MUTANT_KINDS,
    non_answer: bool = False,
    seed: int = 0,
) -> tuple[list[dict[str, str]], list[Skipped]]:
    """Every task's group, in task order, and the tasks that got none (with the reason)."""
    rows: list[dict[str, str]] = []
    skipped: list[Skipped] = []
    for task in tasks:
        group = contrast_group(task, k, check, kinds, non_answer, seed)
        if isinstance(group, Skipped):
            skipped.append(group)
        else:
            rows += group
    return rows, skipped


def main(argv: Sequence[str] | None = None) -> None:
    from judgelab.tasks import tasks_from_frame

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tasks", type=Path, help="the tasks table (data/tasks/tasks.parquet)")
    parser.add_argument("out", type=Path, help="the candidates file to write (JSONL)")
    parser.add_argument("--k", type=int, default=4, help="candidates per group")
    parser.add_argument("--kinds", nargs="+", default=list(MUTANT_KINDS), choices=MUTANT_KINDS)
    parser.add_argument("--non-answer", action="store_true", help="one member is a non-answer")
    parser.add_argument("--seed", type=int, default=0, help="seeds the order within a group")
    args = parser.parse_args(argv)
    tasks = tasks_from_frame(pl.read_parquet(args.tasks))
    rows, skipped = contrast_groups(
        tasks, args.k, execution_check(), args.kinds, args.non_answer, args.seed
    )
    write_text(args.out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    groups = len({r["task_id"] for r in rows})
    print(f"{groups} groups ({len(rows)} candidates) -> {args.out}; {len(skipped)} tasks skipped")
    for s in skipped:
        print(f"  {s.task_id}: {s.reason}")


if __name__ == "__main__":
    main()
