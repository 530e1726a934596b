"""Execution evaluator: the candidate's code against the task's tests, through the sandbox.

Contract of `ExecutionEvaluator.score_one(task, candidate) -> Verdict`, per candidate:
- task without tests (AutoRL)          -> unscored "task has no tests"
- no code in the answer                -> scored 0.0, reason "no code in answer"
- every test passed                    -> scored 1.0, reason "tests passed"
- the code faked an answer             -> scored 0.0, reason "forged: <what it did>" (a reply
  that is not plain data, e.g. an object equal to everything; a write to the reply pipe that
  is no reply; an exit with status 0 before answering)
- tests failed / exited before answering / timeout / memory / killed -> scored 0.0; `reason`
  says which, `explanation` is a short tail of the code's stderr and the tests' traceback. A
  program that does not compile fails too, before any test runs: reason "tests failed:
  SyntaxError: ..." (or IndentationError, TabError), outcome not_parsed.
- the sandbox or the tests themselves failed (our fault, not the code's) -> unscored;
  docs/SECURITY.md lists every way there and why the code cannot take one (a tester that
  fails on a reply is the code's failure: "a reply too costly to rebuild")
latency_s is the sandbox's duration.

Every verdict also names its outcome (`Verdict.outcome`, the scores table's `outcome`
column): one of `verdicts.OUTCOMES`, of which UNPARSEABLE are the answers whose code never ran
(no code, or code that does not compile). The analysis and training read that column; nothing
parses a reason back.

How the tests run (judgelab.sandbox.run_tests; docs/SECURITY.md): the code is imported in the
sandbox (`candidate_module`: the prompt's own imports and helpers, then the answer, so the
answer's definitions win; a completion-style answer, the body only, follows the prompt) and
only answers calls. The task's tests run in the trusted tester, another process: HumanEval's
`check` with the prompt's helpers beside it, calling the candidate through a forwarder.
Tests judgelab writes itself (input/output pairs, tasks.files.check_function) are calls whose
returned values the tester rebuilds and compares with the expected ones
(judgelab.sandbox.compare: integers exactly, floats within the task's tolerance) under the
run's limits: no reply is rebuilt in this process, which reads only the tester's short verdict.
One verdict builder (`tasks.testing.judge`, through `code_verdict`) and one set of limits
(`limits_of`) serve scoring, training and the guard (guard/truth.py). The code is executed only
in the sandbox; `ast` here only parses.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from judgelab.answer import parse_answer
from judgelab.config.evaluators import ExecutionSettings
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.evaluators.extended import extended_cases
from judgelab.sandbox import CallTests, Limits
from judgelab.tasks.files import io_tolerance
from judgelab.tasks.testing import PASSED, Judged, judge
from judgelab.verdicts import Candidate, Task, Verdict

log = logging.getLogger(__name__)

EXPLANATION_CHARS = 600
REASON_CHARS = 200

# Reasons that name an outcome by themselves (the tests' own: tasks.testing.PASSED, FAILED,
# FORGED).
NO_TESTS = "task has no tests"
NO_CODE = "no code in answer"
EXTENDED = "extended: "  # + why code that passed the task's own tests failed the extra ones


class ExecutionEvaluator(PointwiseEvaluator):
    """Runs the candidate's code against the task's unit tests in the sandbox."""

    protocol = ExecutionSettings.protocol
    spec: ExecutionSettings
    # every run in its own uids, namespaces and temp dir (judgelab.sandbox): one per core
    concurrency = max(1, len(os.sched_getaffinity(0)))

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        # `repeat` is accepted for the common evaluator signature; execution is deterministic.
        if not task.test or not task.entry_point:
            return Verdict.unscored(NO_TESTS, outcome="no_tests")
        code = parse_answer(candidate.completion).code
        if code is None:
            return Verdict.scored(0.0, reason=NO_CODE, outcome="no_code")
        return self.code_verdict(task, code)

    def code_verdict(self, task: Task, code: str) -> Verdict:
        """The execution truth's verdict on `code` (a whole answer's code, or a completion of
        the prompt) for a task with tests: what scoring, training and the guard each ask for,
        under this evaluator's one set of limits (`limits_of`)."""
        limits = limits_of(self.spec)
        verdict = self._verdict(judge(task, code, limits))
        if self.spec.tests == "extended" and verdict.outcome == "passed":
            return self.extended_verdict(task, code, limits, verdict)
        return verdict

    def extended_verdict(self, task: Task, code: str, limits: Limits, original: Verdict) -> Verdict:
        """The verdict on the extra tests, for code that passed the original ones: their
        inputs are calls, their expected values (the reference's) are compared in the tester."""
        assert task.entry_point is not None and task.test is not None
        extra = extended_cases(task, self.spec.extended_inputs, self.spec.extended_seed, limits)
        if not extra.cases:
            return original
        args, expected = [list(a) for a, _ in extra.cases], [e for _, e in extra.cases]
        tests = CallTests(task.entry_point, args, expected, rel_tol=io_tolerance(task.test))
        verdict = self._verdict(judge(task, code, limits, tests))
        latency = original.latency_s + verdict.latency_s
        if verdict.outcome == "passed":
            return dataclasses.replace(original, latency_s=latency)
        reason = EXTENDED + (verdict.reason or "")
        return dataclasses.replace(verdict, reason=reason[:REASON_CHARS], latency_s=latency)

    def score_many(
        self, pairs: Iterable[tuple[Task, Candidate]], workers: int = 2
    ) -> list[Verdict]:
        """Score (task, candidate) pairs in a small thread pool; verdicts in input order."""
        pairs = list(pairs)
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            return list(pool.map(lambda pair: self.score_one(*pair), pairs))

    def _verdict(self, judged: Judged) -> Verdict:
        outcome, reason, run = judged.outcome, judged.reason, judged.run
        if outcome == "passed":
            return Verdict.scored(1.0, reason=PASSED, outcome="passed", latency_s=run.duration_s)
        explanation = run.detail[-EXPLANATION_CHARS:].strip() or None
        common = {"explanation": explanation, "latency_s": run.duration_s}
        if outcome == "sandbox_error":
            return Verdict.unscored(reason[:REASON_CHARS], outcome=outcome, **common)  # type: ignore[arg-type]
        return Verdict.scored(0.0, reason=reason[:REASON_CHARS], outcome=outcome, **common)  # type: ignore[arg-type]


def limits_of(spec: ExecutionSettings) -> Limits:
    """The sandbox limits of an execution truth's settings: the one set the evaluator, the
    guard and training run the tests under (ExecutionSettings holds cpu_s >= timeout_s)."""
    return Limits(spec.timeout_s, spec.cpu_s, spec.memory_mb)
