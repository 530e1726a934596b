"""Benchmark: execution verdicts per second, the sandbox's throughput (issue 27, item 5).

Three ways of scoring the same candidates, in turn, `--rounds` times, so drift in the host's
load falls on all of them:
- before: the program run as `python main.py` by a new launcher interpreter per run, its exit
  status read as the verdict (what the execution evaluator did before the harness);
- harness, cold: the forgery-proof harness (evaluators/harness.py), a new launcher per run;
- harness, warm (the default): the harness run in a fork of the warm launcher.
Two workloads: the canonical solutions of the first `--problems` HumanEval problems, and one
differential task of `--cases` input/output pairs (io mode), `--copies` candidates of it.
Runs go through a pool of as many threads as the execution evaluator uses (one per core).
Printed: candidates per second per way and workload, and each way's ratio to "before".

    .venv/bin/python bench/sandbox.py [--problems 40] [--cases 50] [--copies 40] [--rounds 3]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from judgelab import hardware  # noqa: E402
from judgelab.config import HumanEvalSettings  # noqa: E402
from judgelab.evaluators import sandbox  # noqa: E402
from judgelab.evaluators.execution import ExecutionJudge, build_program  # noqa: E402
from judgelab.evaluators.settings import ExecutionSettings  # noqa: E402
from judgelab.tasks.files import IOCase, check_function  # noqa: E402
from judgelab.tasks.humaneval import load_humaneval  # noqa: E402
from judgelab.verdicts import Candidate, Task  # noqa: E402

JUDGE = ExecutionJudge(ExecutionSettings(name="execution", timeout_s=10, cpu_s=10))


def humaneval(n: int) -> list[tuple[Task, str]]:
    tasks = load_humaneval(HumanEvalSettings(offset=0, limit=n))
    return [(t, t.prompt + (t.canonical_solution or "")) for t in tasks]


def differential(cases: int, copies: int) -> list[tuple[Task, str]]:
    code = "def main_solution(n, k):\n    return sorted(str(n * i % 97) for i in range(k))\n"

    def expected(n: int) -> list[str]:
        return sorted(str(n * i % 97) for i in range(n % 7 + 1))

    pairs = [IOCase(input={"n": n, "k": n % 7 + 1}, output=expected(n)) for n in range(cases)]
    task = Task(
        task_id="diff", source="custom", request="main_solution", prompt="",
        entry_point="main_solution", test=check_function("main_solution", pairs),
    )  # fmt: skip
    return [(task, code)] * copies


def before(task: Task, code: str) -> bool:
    program = build_program(task, code)
    return sandbox.run_python(program, timeout_s=10, cpu_s=10).status == "passed"


def harness(task: Task, code: str) -> bool:
    candidate = Candidate(task.task_id, "c", 0, f"<code>\n{code}\n</code>")
    return JUDGE.score_one(task, candidate).score == 1.0


WAYS: dict[str, tuple[Callable[[Task, str], bool], bool]] = {
    "before (python main.py, exit status)": (before, False),
    "harness, cold launcher": (harness, False),
    "harness, warm launcher (default)": (harness, True),
}


def rate(work: list[tuple[Task, str]], way: Callable[[Task, str], bool], warm: bool) -> float:
    sandbox.USE_WARM_LAUNCHER = warm
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=JUDGE.concurrency) as pool:
        passed = list(pool.map(lambda pair: way(*pair), work))
    elapsed = time.perf_counter() - started
    assert all(passed), f"{passed.count(False)} of {len(passed)} did not pass"
    return len(work) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--copies", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"CPU: {hardware.cpu_info().summary()}")
    print(f"threads: {JUDGE.concurrency}")
    workloads = {
        f"HumanEval canonical ({args.problems})": humaneval(args.problems),
        f"differential, {args.cases} cases ({args.copies})": differential(args.cases, args.copies),
    }
    for work in workloads.values():  # warm-up: the launchers, the page cache
        for way, warm in WAYS.values():
            rate(work[:4], way, warm)
    rates: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for wname, work in workloads.items():
            for name, (way, warm) in WAYS.items():
                rates.setdefault((wname, name), []).append(rate(work, way, warm))
    for wname in workloads:
        base = statistics.median(rates[(wname, next(iter(WAYS)))])
        print(f"\n{wname}")
        for name in WAYS:
            got = rates[(wname, name)]
            med = statistics.median(got)
            print(f"  {name:40s} {med:6.1f} candidates/s  x{med / base:4.2f}  "
                  f"(rounds: {', '.join(f'{r:.1f}' for r in got)})")  # fmt: skip


if __name__ == "__main__":
    main()
