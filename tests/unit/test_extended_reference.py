"""The default truth on the committed reference audit's candidates (docs/SECURITY.md): the 9
correct answers that extra inputs outside the tasks' contracts used to fail now pass, and the
4 wrong answers that the original tests pass fail the extended ones, each on the input the
hand-check names. The full run over all 346 is reference/extended_truth.py."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from judgelab.config.evaluators import ExecutionSettings
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.tasks import tasks_from_frame
from judgelab.verdicts import Candidate, Task

DATA = Path(__file__).resolve().parents[2] / "reference" / "data"
# correct code that the contract-free extra inputs failed (unequal lengths, k > len(arr),
# unbalanced parentheses, a mutated sentence, multiply(14, -13))
CORRECT = ["f651a201d057a0fd", "66b035a7a2690ff3", "b46ea1cd145cf44b", "a24e3cd7a542f7b8",
           "8417d2f50ec92d30", "773d956491f0be2e", "e94f688e7a940bff", "4cd9d7bee5a515e7",
           "803ef1a950a8cf01"]  # fmt: skip
WRONG = {
    "57a2fabf815377b6": "largest_divisor(2,) returned null, expected 1",
    "0d6912a179345580": "modp(101, 101) returned 1, expected 2",
    "3febad405c5c64a6": "is_simple_power(2, 1) returned true, expected false",
    "cdd8a0568b4dffac": "fix_spaces('    Exa 1 2 2 mple',) returned",
}


@pytest.fixture(scope="module")
def pairs() -> dict[str, tuple[Task, Candidate]]:
    tasks = {t.task_id: t for t in tasks_from_frame(pl.read_parquet(DATA / "tasks/tasks.parquet"))}
    rows = pl.read_parquet(DATA / "rollouts/rollouts.parquet").filter(
        pl.col("candidate_id").is_in([*CORRECT, *WRONG])
    )
    return {r["candidate_id"]: (tasks[r["task_id"]], Candidate(
        r["task_id"], r["candidate_id"], r["sample_index"], r["completion"]))
        for r in rows.iter_rows(named=True)}  # fmt: skip


def test_the_reference_candidates_get_the_hand_checked_verdicts(
    pairs: dict[str, tuple[Task, Candidate]],
) -> None:
    assert len(pairs) == len(CORRECT) + len(WRONG)
    judge = ExecutionEvaluator(ExecutionSettings(name="execution"))
    original = ExecutionEvaluator(judge.spec.model_copy(update={"tests": "original"}))
    ids = [*CORRECT, *WRONG]
    before = original.score_many([pairs[i] for i in ids])
    after = judge.score_many([pairs[i] for i in ids])
    assert all(v.score == 1.0 for v in before), [v.reason for v in before]
    verdicts = dict(zip(ids, after, strict=True))
    for cid in CORRECT:
        assert verdicts[cid].score == 1.0, (cid, verdicts[cid].reason)
    for cid, shown in WRONG.items():
        verdict = verdicts[cid]
        assert (verdict.score, verdict.outcome) == (0.0, "tests_failed"), (cid, verdict)
        assert (verdict.reason or "").startswith("extended: tests failed: case "), verdict.reason
        assert shown in (verdict.reason or ""), (cid, verdict.reason)
