"""Benchmark: the pipeline from the scores stage on, at 125 to 1,000 tasks: does any part grow
faster than linearly with the number of tasks?

Tasks: CodeI/O items (codeio-hq) through `judgelab tasks` (timed once: items, kept, dropped by
reason), the first N kept tasks taken for each size. Candidates: synthetic, four per task,
imported through `rollouts.candidates` (`judgelab.rollouts.imported`), so no policy is
sampled: the task's reference solution (writer ``reference``), the reference with its first
``return`` made to return None (``synthetic``; its tests decide, most fail), an answer
without code (``synthetic``) and a non-answer (``non_answer``). Two origins, so the analysis
also computes its by-writer and by-origin blocks. Judge: RULER against a loopback
OpenAI-compatible endpoint that answers every call after `--latency` seconds (the tests'
loopback judge and its pure replies, run as a separate process), `max_concurrency` 16;
format, syntax and execution beside it, as in the default pipeline.

Per size, in a fresh project (so no judge call is a cache hit), timed:
- `judgelab rollouts` (the import), `judgelab scores` and `judgelab analysis` (MLflow
  logging on), each as the whole command; for scores also its lanes (fan_out's "lane ...:
  N units in S s" lines: the judge lane and the local lane of format/syntax/execution);
- in this process, on the same tables: the metrics (`compute_metrics`), the whole analysis
  (`run_analysis`: metrics, plots, report) and MLflow logging (`log_pipeline_run`, into a
  fresh sqlite store per size, created before the clock starts).
Printed: each time, and its ratio to the smallest size against the ratio of tasks.

    .venv/bin/python bench/pipeline_scaling.py [--sizes 125 250 500 1000] [--latency 0.5]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import yaml

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
LANE = re.compile(r"lane (\S+): (\d+) units in ([0-9.]+) s")

# The loopback judge in a process of its own: support/'s server and replies (a function of
# the request only), each reply held for the given latency. The benchmark closes its stdin
# to stop it.
LOOPBACK = """
import sys
from support.openai_server import OpenAIServer
from support.pure_endpoint import pure_reply
latency, serve = float(sys.argv[1]), int(sys.argv[2])
def reply(body):
    return {**pure_reply(body), "delay_s": latency}
with OpenAIServer(reply, max_concurrency=serve) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
    print(f"rejected (429): {server.rejected}", file=sys.stderr)
"""


def scratch_env(project: Path) -> dict[str, str]:
    """This environment without the checkout's Prefect/MLflow/judgelab state, the venv first
    on PATH and JUDGELAB_ROOT at `project` (every state file, caches and mlflow.db land there)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PREFECT_", "MLFLOW_", "JUDGELAB_"))
    }
    env.update(PATH=f"{BIN}:{env['PATH']}", JUDGELAB_ROOT=str(project))
    return env


def params(base_url: str, codeio_limit: int) -> dict:
    return {
        "models": {
            "judge": {
                "kind": "endpoint", "base_url": base_url, "model": "judge",
                "structured_output": "json_schema", "max_concurrency": 16,
            },
        },
        "tasks": {
            "humaneval": {"enabled": False},
            "codeio": {"enabled": True, "file": "codeio-hq", "limit": codeio_limit},
            "autorl": {"enabled": False},
        },
        "rollouts": {"candidates": "inputs/candidates.jsonl"},
        "scores": {
            "evaluators": [
                {"name": "format", "kind": "format"},
                {"name": "syntax", "kind": "syntax"},
                {"name": "execution", "kind": "execution", "timeout_s": 10, "cpu_s": 10},
                {"name": "ruler", "kind": "ruler", "judge": "judge"},
            ]
        },
        "train": {"rewards": []},
        "tracking": {"enabled": True},
        "runner": {"kind": "threads", "workers": 32},
    }  # fmt: skip


def judgelab(project: Path, stage: str) -> tuple[float, str]:
    start = time.monotonic()
    proc = subprocess.run(
        [str(BIN / "judgelab"), stage, "-p", "params.yaml"],
        cwd=project, env=scratch_env(project), capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode:
        sys.exit(f"judgelab {stage} failed:\n{proc.stderr[-3000:]}")
    return time.monotonic() - start, proc.stderr + proc.stdout


def candidates(tasks: pl.DataFrame) -> list[dict[str, str]]:
    from judgelab.rollouts.contrast import canonical_source
    from judgelab.rollouts.perturb import NON_ANSWER, answer
    from judgelab.tasks import tasks_from_frame

    rows = []
    for task in tasks_from_frame(tasks):
        code = canonical_source(task)
        broken = code.replace("return ", "return None  # ", 1)
        members = [
            ("reference", answer(task.request, code)),
            ("synthetic", answer(task.request, broken)),
            ("synthetic", "Let's think step by step."),
            ("non_answer", NON_ANSWER),
        ]
        rows += [{"task_id": task.task_id, "policy": w, "completion": c} for w, c in members]
    return rows


def in_process(project: Path) -> dict[str, float]:
    """The analysis's parts timed apart on the project's tables."""
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{project / 'bench-mlflow.db'}"
    from mlflow.tracking import MlflowClient

    from judgelab.analysis.metrics import compute_metrics
    from judgelab.config import load_settings
    from judgelab.report.outputs import run_analysis
    from judgelab.schemas import validate_file
    from judgelab.tracking import log_pipeline_run

    settings = load_settings(project / "params.yaml")
    data = project / "data"
    tasks = validate_file(data / "tasks/tasks.parquet", "tasks")
    rollouts = validate_file(data / "rollouts/rollouts.parquet", "rollouts")
    scores = validate_file(data / "scores/scores.parquet", "scores")
    MlflowClient().search_experiments()  # the store's schema is created here, off the clock
    t0 = time.perf_counter()
    compute_metrics(tasks, rollouts, scores, settings.analysis)
    t1 = time.perf_counter()
    out = project / "bench-analysis"
    metrics = run_analysis(tasks, rollouts, scores, settings.analysis, out)
    t2 = time.perf_counter()
    log_pipeline_run(
        settings, metrics, out, scores_run_id=scores["run_id"][0], latency={},
        lock_path=project / "no-dvc.lock", scores_path=data / "scores/scores.parquet",
    )  # fmt: skip
    t3 = time.perf_counter()
    return {"metrics": t1 - t0, "analysis (metrics+plots+report)": t2 - t1, "mlflow": t3 - t2}


def one_size(tmp: Path, seed: Path, n: int, base_url: str, limit: int) -> dict[str, float]:
    project = tmp / f"n{n}"
    (project / "data/tasks").mkdir(parents=True)
    (project / "inputs").mkdir()
    (project / "params.yaml").write_text(yaml.safe_dump(params(base_url, limit)))
    tasks = pl.read_parquet(seed / "data/tasks/tasks.parquet").head(n)
    tasks.write_parquet(project / "data/tasks/tasks.parquet")
    lines = "".join(json.dumps(r) + "\n" for r in candidates(tasks))
    (project / "inputs/candidates.jsonl").write_text(lines)
    times: dict[str, float] = {}
    times["rollouts command"], _ = judgelab(project, "rollouts")
    times["scores command"], log = judgelab(project, "scores")
    for lane, _units, seconds in LANE.findall(log):
        times[f"scores lane {lane}"] = float(seconds)
    times["analysis command"], _ = judgelab(project, "analysis")
    times.update({f"in-process {k}": v for k, v in in_process(project).items()})
    metrics = json.loads((project / "data/analysis/metrics.json").read_text())
    assert metrics["n_tasks"] == n and "writers" in metrics, "the analysis saw other tables"
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[125, 250, 500, 1000])
    ap.add_argument("--latency", type=float, default=0.5, help="seconds per judge reply")
    ap.add_argument("--codeio-limit", type=int, default=2750, help="codeio-hq items read")
    ap.add_argument("--tasks", type=Path, help="a tasks table to use instead of the stage")
    args = ap.parse_args()

    from judgelab.hardware import cpu_info

    print(f"CPU: {cpu_info().summary()}", flush=True)
    judge = subprocess.Popen(
        [sys.executable, "-c", LOOPBACK, str(args.latency), "16"],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
    )  # fmt: skip
    base_url = judge.stdout.readline().strip()  # type: ignore[union-attr]
    results: dict[int, dict[str, float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            seed = tmp / "seed"
            (seed / "data/tasks").mkdir(parents=True)
            (seed / "params.yaml").write_text(yaml.safe_dump(params(base_url, args.codeio_limit)))
            if args.tasks:
                (seed / "data/tasks/tasks.parquet").write_bytes(args.tasks.read_bytes())
            else:
                seconds, _ = judgelab(seed, "tasks")
                dropped = json.loads((seed / "data/tasks/dropped.json").read_text())
                kept = pl.read_parquet(seed / "data/tasks/tasks.parquet").height
                print(f"tasks stage: {args.codeio_limit} items, {kept} kept, {seconds:.1f} s")
                print(f"  dropped: {json.dumps(dropped)[:600]}", flush=True)
            have = pl.read_parquet(seed / "data/tasks/tasks.parquet").height
            if have < max(args.sizes):
                sys.exit(f"only {have} tasks, fewer than {max(args.sizes)}: raise --codeio-limit")
            for n in args.sizes:
                results[n] = one_size(tmp, seed, n, base_url, args.codeio_limit)
                print(f"{n} tasks: " + ", ".join(f"{k} {v:.2f} s" for k, v in results[n].items()),
                      flush=True)  # fmt: skip
    finally:
        judge.stdin.close()  # type: ignore[union-attr]
        judge.wait(timeout=30)
    report(results)


def report(results: dict[int, dict[str, float]]) -> None:
    sizes = sorted(results)
    base = sizes[0]
    names = [k for k in results[base] if all(k in results[n] for n in sizes)]
    print(f"\nseconds by tasks (ratio to {base} tasks; tasks ratio " +
          ", ".join(f"{n / base:.0f}x" for n in sizes) + ")")  # fmt: skip
    print("part | " + " | ".join(f"{n} tasks" for n in sizes))
    for k in names:
        cells = [f"{results[n][k]:.2f} s ({results[n][k] / results[base][k]:.2f}x)" for n in sizes]
        print(f"{k} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
