"""The sandbox: where generated code runs, and the only place it runs.

The bottom of the house: it imports nothing of judgelab, and everything that runs code
(the execution evaluator, the task sources, the surveys, the CLI) goes through this face.
- `run_python(code, ...)`: a program, run once (script mode), its exit and output reported.
- `run_tests(code, tests, ...)`: the truth. `code` is imported in a sandboxed process that
  only answers calls; the tests, their expected values and the verdict live in a trusted
  tester process the code cannot reach, and only plain data crosses (verify.py); a returned
  value is rebuilt and compared there (compare.py), under the run's limits.
docs/SECURITY.md states the invariant and what the code can still do.
"""

from judgelab.sandbox.run import SandboxResult, SandboxStatus, run_python
from judgelab.sandbox.verify import CallTests, CheckTests, Limits, TestRun, run_tests

__all__ = [
    "CallTests",
    "CheckTests",
    "Limits",
    "SandboxResult",
    "SandboxStatus",
    "TestRun",
    "run_python",
    "run_tests",
]
