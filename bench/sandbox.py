"""Benchmark: execution verdicts per second through the sandbox, before and after a change.

Scores the same candidates with this checkout's execution evaluator and with another commit's
(`--before`, a git ref, checked out into a temporary worktree), in turn, `--rounds` times, so
drift in the host's load falls on both. Each way runs in a process of its own (its own warm
launcher), warmed up before it is timed. Two workloads: the canonical solutions of the first
`--problems` HumanEval problems, and one differential task of `--cases` input/output pairs,
`--copies` candidates of it. Runs go through a pool of as many threads as the evaluator uses
(one per core). Printed: candidates per second per way and workload, and the ratio to before.

    .venv/bin/python bench/sandbox.py [--before 7616653] [--problems 40] [--cases 50]
                                      [--copies 40] [--rounds 3]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(src: str, workload: str, n: int, cases: int) -> None:
    """In a process of its own: the rate of one way on one workload, printed as JSON."""
    sys.path.insert(0, src)
    from judgelab.config import HumanEvalSettings
    from judgelab.config.evaluators import ExecutionSettings
    from judgelab.evaluators.execution import ExecutionEvaluator
    from judgelab.tasks.files import IOCase, check_function
    from judgelab.tasks.humaneval import load_humaneval
    from judgelab.verdicts import Candidate, Task

    judge = ExecutionEvaluator(ExecutionSettings(name="execution", timeout_s=10, cpu_s=10))
    if workload == "humaneval":
        tasks = load_humaneval(HumanEvalSettings(offset=0, limit=n))
        work = [(t, t.prompt + (t.canonical_solution or "")) for t in tasks]
    else:
        code = "def main_solution(n, k):\n    return sorted(str(n * i % 97) for i in range(k))\n"
        pairs = [
            IOCase(input={"n": i, "k": i % 7 + 1},
                   output=sorted(str(i * j % 97) for j in range(i % 7 + 1)))
            for i in range(cases)
        ]  # fmt: skip
        test = check_function("main_solution", pairs)
        task = Task(task_id="diff", source="custom", request="main_solution", prompt="",
                    entry_point="main_solution", test=test)  # fmt: skip
        work = [(task, code)] * n

    def score(pair: tuple[Task, str]) -> bool:
        task, code = pair
        candidate = Candidate(task.task_id, "c", 0, f"<code>\n{code}\n</code>")
        return judge.score_one(task, candidate).score == 1.0

    with ThreadPoolExecutor(max_workers=judge.concurrency) as pool:
        list(pool.map(score, work[:4]))  # warm-up: the launcher, the page cache
        started = time.perf_counter()
        passed = list(pool.map(score, work))
        elapsed = time.perf_counter() - started
    assert all(passed), f"{passed.count(False)} of {len(passed)} did not pass"
    print(json.dumps({"rate": len(work) / elapsed, "threads": judge.concurrency}))


def measure(src: Path, workload: str, n: int, cases: int) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", str(src), workload, str(n), str(cases)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return float(json.loads(out.stdout.strip().splitlines()[-1])["rate"])


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        src, workload, n, cases = sys.argv[2:6]
        worker(src, workload, int(n), int(cases))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="7616653", help="git ref of the 'before' code")
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from judgelab import hardware

    print(f"CPU: {hardware.cpu_info().summary()}")
    with tempfile.TemporaryDirectory(prefix="judgelab-before-") as tmp:
        before = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(before), args.before],
                       cwd=ROOT, check=True, capture_output=True)  # fmt: skip
        try:
            ways = {f"before ({args.before})": before / "src",
                    "after (this checkout)": ROOT / "src"}  # fmt: skip
            workloads = {
                f"HumanEval canonical ({args.problems})": ("humaneval", args.problems),
                f"differential, {args.cases} cases ({args.copies})": ("diff", args.copies),
            }
            rates: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.rounds):
                for wname, (kind, n) in workloads.items():
                    for name, src in ways.items():
                        rate = measure(src, kind, n, args.cases)
                        rates.setdefault((wname, name), []).append(rate)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=ROOT,
                           check=False, capture_output=True)  # fmt: skip
    for wname in workloads:
        base = statistics.median(rates[(wname, next(iter(ways)))])
        print(f"\n{wname}")
        for name in ways:
            got = rates[(wname, name)]
            med = statistics.median(got)
            print(f"  {name:28s} {med:6.1f} candidates/s  x{med / base:4.2f}  "
                  f"(rounds: {', '.join(f'{r:.1f}' for r in got)})")  # fmt: skip


if __name__ == "__main__":
    main()
