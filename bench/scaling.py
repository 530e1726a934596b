"""Benchmark: the scores stage against a slow endpoint judge at concurrency 1, 4 and 16.

A loopback OpenAI-compatible judge answers every call after a fixed latency (`--latency`,
0.5 s) and serves at most `--serve` requests at once (429 beyond). `judgelab scores` — the
real CLI, flow and RULER judge — scores `--groups` HumanEval groups (k = 4) with one RULER
judge whose `max_concurrency` is 1, 4 or 16, each in a fresh project so no call is a cache
hit. The levels run in turn, `--rounds` times, so drift in the host's load falls on all.

Printed per level: the judge lane's wall time (fan_out's own "lane model:judge: ... in" line:
from its first unit submitted to its last result; the execution evaluator's units run in
their own lane beside it), the whole command's wall time, the ideal (calls x
latency / concurrency), the share of the ideal reached, the speed-up over concurrency 1, and
the orchestration overhead per call at concurrency 1 ((phase - calls x latency) / calls, as a
share of the latency). Targets (issue 16): concurrency 16 at least 12x faster than 1; overhead
at most 5 % of a call.

    .venv/bin/python bench/scaling.py [--groups 64] [--latency 0.5] [--levels 1 4 16]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from support.openai_server import OpenAIServer  # noqa: E402
from support.pure_endpoint import pure_reply  # noqa: E402
from support.scratch import BIN, scratch_env  # noqa: E402

PHASE = re.compile(r"lane model:judge: (\d+) units in ([0-9.]+) s")


def params(base_url: str, groups: int, concurrency: int) -> dict:
    endpoint = {"kind": "endpoint", "base_url": base_url, "structured_output": "json_schema"}
    return {
        "models": {
            "writer": {**endpoint, "model": "writer", "max_concurrency": 16},
            "judge": {**endpoint, "model": "judge", "max_concurrency": concurrency},
        },
        "tasks": {
            "humaneval": {"enabled": True, "offset": 0, "limit": groups},
            "autorl": {"enabled": False, "model": "writer"},
        },
        "rollouts": {"policy": "writer", "k": 4, "max_tokens": 64},
        "scores": {  # execution is required (the truth); its units run in their own lane
            "evaluators": [
                {"name": "execution", "kind": "execution"},
                {"name": "ruler", "kind": "ruler", "judge": "judge"},
            ]
        },
        "train": {"rewards": []},
        "tracking": {"enabled": False},
        "runner": {"kind": "threads", "workers": 32},
    }


def judgelab(project: Path, stage: str) -> tuple[float, str]:
    start = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "judgelab"), stage, "-p", "params.yaml"],
        cwd=project,
        env=scratch_env(project),
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        sys.exit(f"judgelab {stage} failed:\n{proc.stderr[-3000:]}")
    return time.monotonic() - start, proc.stderr + proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--groups", type=int, default=64)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--serve", type=int, default=16, help="requests the judge serves at once")
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()

    def reply(body: dict) -> dict:
        out = pure_reply(body)
        if body.get("model") == "judge":
            return {**out, "delay_s": args.latency}
        return out

    from judgelab.hardware import cpu_info

    print(f"CPU: {cpu_info().summary()}")
    phase: dict[int, list[float]] = {c: [] for c in args.levels}
    whole: dict[int, list[float]] = {c: [] for c in args.levels}
    with (
        OpenAIServer(reply, max_concurrency=args.serve) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        seed = Path(tmp) / "seed"
        seed.mkdir()
        (seed / "params.yaml").write_text(yaml.safe_dump(params(server.base_url, args.groups, 1)))
        judgelab(seed, "tasks")
        # no tests: the execution evaluator (required beside a judge) answers "task has no
        # tests" at once, so the judge lane is measured without sandbox runs beside it
        tasks = seed / "data" / "tasks" / "tasks.parquet"
        nulls = [pl.lit(None, pl.Utf8).alias(c) for c in ("test", "entry_point")]
        nulls.append(pl.lit("autorl").alias("source"))  # the schema: only those lack tests
        pl.read_parquet(tasks).with_columns(nulls).write_parquet(tasks)
        judgelab(seed, "rollouts")
        for r in range(args.rounds):
            for c in args.levels:
                project = Path(tmp) / f"c{c}-r{r}"
                project.mkdir()
                (project / "params.yaml").write_text(
                    yaml.safe_dump(params(server.base_url, args.groups, c))
                )
                # the same inputs, a fresh judge cache (JUDGELAB_ROOT is the project)
                for sub in ("tasks", "rollouts"):
                    (project / "data" / sub).mkdir(parents=True)
                    for f in (seed / "data" / sub).iterdir():
                        (project / "data" / sub / f.name).write_bytes(f.read_bytes())
                seconds, log = judgelab(project, "scores")
                m = PHASE.search(log)
                if not m:
                    sys.exit(f"no judge lane line in the scores log:\n{log[-2000:]}")
                calls = int(m.group(1))
                phase[c].append(float(m.group(2)))
                whole[c].append(seconds)
                print(f"round {r} concurrency {c}: phase {m.group(2)} s, command {seconds:.1f} s")
        print(f"rejected by the server's bound (429): {server.rejected}")
    base = statistics.median(phase[args.levels[0]])
    print(f"\n{calls} judge calls of {args.latency} s; median of {args.rounds} round(s)")
    print("concurrency | phase s | command s | ideal s | share of ideal | speed-up vs 1")
    for c in args.levels:
        p, w = statistics.median(phase[c]), statistics.median(whole[c])
        ideal = calls * args.latency / c
        print(
            f"{c:>11} | {p:7.2f} | {w:9.1f} | {ideal:7.2f} | {ideal / p:14.0%} | {base / p:5.1f}x"
        )
    if args.levels[0] == 1:
        over = (base - calls * args.latency) / calls
        print(
            f"overhead per call at concurrency 1: {over * 1000:.0f} ms ({over / args.latency:.1%})"
        )


if __name__ == "__main__":
    main()
