"""Benchmark: what a reply costs the trusted side, per MB, the worst beside an honest one.

One input/output task whose single case expects a list of `--mb` MB of integers; candidates
that return it (honest), or, through their own encoder (the module `wire` of their runner,
replaced), a reply of about the same size built to cost the most: a set and a dict of integers
that share one hash, lists nested 900 deep, integers of 99,999 digits, a string of "é". Each is
scored by the execution evaluator (timeout_s = cpu_s = 10 s) in this process, `--rounds` times.
Printed per reply: its size, the verdict, the run's wall time, the CPU judgelab's own process
spent on it (time.process_time, its threads included) and both per MB. The tester's own cost
is inside the run's wall time, bounded by cpu_s and memory_mb.

    .venv/bin/python bench/trusted_side.py [--mb 4] [--rounds 2]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from judgelab.config.evaluators import ExecutionSettings  # noqa: E402
from judgelab.evaluators.execution import ExecutionEvaluator  # noqa: E402
from judgelab.tasks.files import TaskRow  # noqa: E402
from judgelab.verdicts import Candidate  # noqa: E402

SHARED = "str(k * (2**61 - 1))"  # every such integer hashes to 0


def replies(mb: int) -> dict[str, str]:
    """Python expressions of wire texts of about `mb` MB each."""
    n = mb * 1_000_000
    return {
        "colliding set": f"'{{\"s\":[' + ','.join({SHARED} for k in range(1, {n // 24})) + ']}}'",
        "colliding dict keys": "'{\"d\":[' + ','.join('[' + " + SHARED
        + f" + ',0]' for k in range(1, {n // 27})) + ']}}'",
        "lists 900 deep": f"'[' + ','.join(['[' * 900 + ']' * 900] * {n // 1801}) + ']'",
        "99,999-digit integers": f"'[' + ','.join(['9' * 99_999] * {max(1, n // 100_000)}) + ']'",
        "'é' string": f"'\"' + 'é' * {n // 2} + '\"'",
    }  # fmt: skip


def candidate(expr: str | None, count: int) -> str:
    if expr is None:
        return f"def f():\n    return list(range({count}))\n"
    return (f"import sys\nTEXT = {expr}\nsys.modules['wire'].encode = lambda value: TEXT\n"
            "def f():\n    return None\n")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    count = args.mb * 1_000_000 // 8  # integers of ~7 digits and a comma
    row = TaskRow(task_id="bench/big", request="f", prompt="def f():\n", entry_point="f",
                  tests=[{"input": [], "output": list(range(count))}])  # type: ignore[list-item]  # fmt: skip
    task = row.task()
    judge = ExecutionEvaluator(ExecutionSettings(name="execution", timeout_s=10, cpu_s=10))
    kinds = {"honest list of integers": None, **replies(args.mb)}
    size = {"honest list of integers": len(",".join(map(str, range(count))))}
    for name, expr in kinds.items():
        if expr is not None:
            size[name] = len(eval(expr).encode())  # noqa: S307 - our own expression
    warm = f"<code>\n{candidate(None, 1)}\n</code>"
    judge.score_one(task, Candidate("bench/big", "warm", 0, warm))
    print(f"{'reply':26} {'MB':>5} {'verdict':40} {'wall s':>7} {'ours CPU s':>10} "
          f"{'wall s/MB':>9} {'ours ms/MB':>10}")  # fmt: skip
    for name, expr in kinds.items():
        code = candidate(expr, count)
        walls, cpus, reason = [], [], ""
        for r in range(args.rounds):
            wall, cpu = time.perf_counter(), time.process_time()
            verdict = judge.score_one(task, Candidate("bench/big", f"{name}{r}", r,
                                                      f"<code>\n{code}\n</code>"))  # fmt: skip
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            reason = f"{verdict.score} {verdict.reason or ''}"[:40]
        mb = size[name] / 1e6
        w, c = statistics.median(walls), statistics.median(cpus)
        print(f"{name:26} {mb:5.1f} {reason:40} {w:7.2f} {c:10.3f} {w / mb:9.2f} "
              f"{1000 * c / mb:10.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
