"""Benchmark: the training stage's torch work in float32 and in bfloat16, on this CPU.

`train.dtype: auto` picks bfloat16 only where the CPU computes it natively (AVX-512 BF16 or
AMX) and float32 elsewhere; this measures whether that is the right call on the host at hand.
Each dtype runs in its own child process, alternating (float32, bfloat16, float32, ...) so the
host's load drifts over both. Each child measures, on the default policy (Qwen2.5-Coder-0.5B,
two LoRA adapters that differ, as in a lockstep run of two judges):
- a training round: per adapter a group of `--rows / 2` at T = 1, prefilled and decoded to
  `--tokens` new tokens per row;
- a GRPO forward+backward: the log-probabilities of `--seqs` sampled sequences (prompt plus
  completion), summed and differentiated, with the cores it kept busy (process CPU time /
  wall time: 2.0 means both cores of this machine worked the whole time).

Prints the CPU and its flags, torch's thread count, the median of each measure per dtype and
the ratio bfloat16 / float32 (below 1: bfloat16 faster). A child still running after
`--limit` seconds is stopped; the measures it had not finished show as "> limit" (on an
AVX2-only CPU bfloat16 takes many minutes).

    .venv/bin/python bench/training_precision.py [--tokens 32] [--rows 8] [--seqs 4] [--pairs 1]
                                                 [--limit 1200]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

ZOO = "qwen2.5-coder-0.5b-instruct"
DTYPES = ("float32", "bfloat16")


def _emit(key: str, value: float) -> None:
    """One measure per line, as soon as it is known: a child stopped at the limit keeps the
    measures it finished."""
    print(json.dumps({key: value}), flush=True)


def child(dtype: str, tokens: int, rows: int, seqs: int) -> None:
    from judgelab.env import configure_offline_env

    configure_offline_env()
    import torch

    from judgelab.config import HumanEvalSettings, LoraSettings, RolloutSettings
    from judgelab.rollouts.generate import policy_messages
    from judgelab.tasks.humaneval import load_humaneval
    from judgelab.training.policy import Policy

    torch.manual_seed(0)
    policy = Policy(ZOO, LoraSettings(), "cpu", dtype=dtype, adapters={"a": None, "b": None})
    with torch.no_grad():
        for name, p in policy.lora_parameters("b").items():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.002)
    policy.model.eval()
    (task,) = load_humaneval(HumanEvalSettings(offset=1, limit=1))
    prompt = policy.prompt_ids(policy_messages(RolloutSettings(), task))
    half = rows // 2
    kwargs = {
        "temperatures": [1.0] * rows,
        "seeds": list(range(rows)),
        "adapters": ["a"] * half + ["b"] * (rows - half),
    }
    policy.sample([prompt] * rows, max_new_tokens=[2] * rows, **kwargs)  # warm-up
    start = time.perf_counter()
    samples = policy.sample([prompt] * rows, max_new_tokens=[tokens] * rows, **kwargs)
    _emit(f"round: {rows} rows, prefill + {tokens} tokens (s)", time.perf_counter() - start)
    _emit("torch threads", float(torch.get_num_threads()))

    policy.use("a")
    policy.model.train()
    batch = [prompt + s.token_ids for s in samples[:seqs]]
    width = max(len(s) for s in batch)
    ids = torch.full((len(batch), width), policy.pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, s in enumerate(batch):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    wall, cpu = time.perf_counter(), time.process_time()
    policy.sequence_logprobs(ids, mask, start=len(prompt) - 1).sum().backward()
    step_s = time.perf_counter() - wall
    _emit(f"GRPO forward+backward, {len(batch)} x {width} tokens (s)", step_s)
    _emit("cores busy in forward+backward", (time.process_time() - cpu) / step_s)


def run_child(dtype: str, args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--child", dtype, "--tokens", str(args.tokens),
           "--rows", str(args.rows), "--seqs", str(args.seqs)]  # fmt: skip
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.limit).stdout
    except subprocess.TimeoutExpired as err:
        raw = err.stdout or b""
        out = raw.decode() if isinstance(raw, bytes) else raw
    measures: dict[str, float] = {}
    for line in out.splitlines():
        if line.startswith("{"):
            measures.update(json.loads(line))
    return measures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--seqs", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("--limit", type=float, default=1200, help="seconds per child process")
    ap.add_argument("--child", choices=DTYPES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.tokens, args.rows, args.seqs)
        return
    from judgelab.hardware import cpu_info, training_dtype

    cpu = cpu_info()
    results: dict[str, list[dict[str, float]]] = {d: [] for d in DTYPES}
    for _ in range(args.pairs):
        for dtype in DTYPES:
            results[dtype].append(run_child(dtype, args))
            print(f"{dtype}: {results[dtype][-1]}", file=sys.stderr)
    print(f"CPU: {cpu.summary()}; native bfloat16: {'yes' if cpu.native_bf16 else 'no'}")
    print(f"train.dtype auto picks {training_dtype('auto', 'cpu', cpu)} here")
    print(f"{args.pairs} run(s) per dtype, medians")
    print(f"{'measure':52} {'float32':>9} {'bfloat16':>9} {'bf16/fp32':>10}")
    keys = list(dict.fromkeys(k for rs in results.values() for r in rs for k in r))

    def median(dtype: str, key: str) -> float | None:
        values = [r[key] for r in results[dtype] if key in r]
        return statistics.median(values) if len(values) == len(results[dtype]) else None

    for key in keys:
        a, b = median("float32", key), median("bfloat16", key)
        unfinished = f"> {int(args.limit)}" if key.endswith("(s)") else "-"  # a time, or not
        cells = [f"{v:9.2f}" if v is not None else f"{unfinished:>9}" for v in (a, b)]
        ratio = f"{b / a:9.2f}x" if a and b is not None else f"{'-':>10}"
        print(f"{key:52} {cells[0]} {cells[1]} {ratio}")


if __name__ == "__main__":
    main()
