"""Benchmark: torch training work and llama.cpp decoding with and without OMP_WAIT_POLICY=PASSIVE.

libgomp reads OMP_WAIT_POLICY once, when the process loads it, so each setting runs in its own
child process; the children alternate (PASSIVE, default, PASSIVE, default, ...) so that the
host's load drifts over both. Each child measures, on the default policy (Qwen2.5-Coder-0.5B,
bfloat16, two LoRA adapters that differ):
- a lockstep training round: 16 rows (per adapter a group of 4 at T = 1 and 4 greedy
  held-out prompts), prefilled and decoded to a fixed number of new tokens per row;
- a GRPO-sized forward and backward: the log-probabilities of 4 sampled sequences, summed
  and differentiated;
- llama.cpp (the same model's GGUF, 2 threads) writing the same number of tokens greedily.

Prints the median of each per setting and the ratio default / PASSIVE.

    .venv/bin/python bench/omp_wait_policy.py [--tokens 48] [--pairs 2]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SETTINGS = {"PASSIVE": "PASSIVE", "default": None}
ZOO = "qwen2.5-coder-0.5b-instruct"


def child(tokens: int) -> dict[str, float]:
    from judgelab.env import configure_offline_env

    configure_offline_env()
    import torch
    from llama_cpp import Llama

    from judgelab.config import HumanEvalSettings, LoraSettings, RolloutSettings
    from judgelab.models.zoo import ensure_model
    from judgelab.rollouts.generate import policy_messages
    from judgelab.tasks.humaneval import load_humaneval
    from judgelab.training.policy import Policy

    torch.set_num_threads(2)
    torch.manual_seed(0)
    policy = Policy(ZOO, LoraSettings(), "cpu", dtype="bfloat16", adapters={"a": None, "b": None})
    with torch.no_grad():
        for name, p in policy.lora_parameters("b").items():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.002)
    policy.model.eval()
    tasks = load_humaneval(HumanEvalSettings(offset=1, limit=5))
    prompts = [policy.prompt_ids(policy_messages(RolloutSettings(), t)) for t in tasks]
    rows = ([prompts[0]] * 4 + prompts[1:]) * 2
    kwargs = {
        "temperatures": ([1.0] * 4 + [0.0] * 4) * 2,
        "seeds": list(range(16)),
        "adapters": ["a"] * 8 + ["b"] * 8,
    }
    policy.sample(rows, max_new_tokens=[2] * 16, **kwargs)  # warm-up
    start = time.perf_counter()
    samples = policy.sample(rows, max_new_tokens=[tokens] * 16, **kwargs)
    round_s = time.perf_counter() - start

    policy.use("a")
    policy.model.train()
    seqs = [prompts[0] + s.token_ids for s in samples[:4]]
    width = max(len(s) for s in seqs)
    ids = torch.full((4, width), policy.pad_id, dtype=torch.long)
    mask = torch.zeros((4, width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    start = time.perf_counter()
    policy.sequence_logprobs(ids, mask, start=len(prompts[0]) - 1).sum().backward()
    step_s = time.perf_counter() - start

    llm = Llama(str(ensure_model(ZOO)), n_threads=2, n_ctx=2048, verbose=False, seed=0)
    text = policy.tokenizer.decode(prompts[1])
    llm.create_completion(text, max_tokens=1, temperature=0.0)  # prompt into the KV cache
    start = time.perf_counter()
    out = llm.create_completion(text, max_tokens=tokens, temperature=0.0)
    llama_s = (time.perf_counter() - start) / max(out["usage"]["completion_tokens"], 1)
    return {
        f"round: 16 rows, prefill + {tokens} tokens (s)": round_s,
        "GRPO forward+backward, 4 rows (s)": step_s,
        "llama.cpp, per token (s)": llama_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.tokens)))
        return
    results: dict[str, list[dict[str, float]]] = {name: [] for name in SETTINGS}
    for _ in range(args.pairs):
        for name, value in SETTINGS.items():
            env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
            if value is not None:
                env["OMP_WAIT_POLICY"] = value
            out = subprocess.run(
                [sys.executable, __file__, "--child", "--tokens", str(args.tokens)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            results[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"{name}: {results[name][-1]}", file=sys.stderr)
    print(f"{args.pairs} runs per setting, medians; {args.tokens} new tokens per row")
    print(f"{'measure':44} {'PASSIVE':>9} {'default':>9} {'default/PASSIVE':>16}")
    for key in results["PASSIVE"][0]:
        a = statistics.median(r[key] for r in results["PASSIVE"])
        b = statistics.median(r[key] for r in results["default"])
        print(f"{key:44} {a:9.3f} {b:9.3f} {b / a:15.2f}x")


if __name__ == "__main__":
    main()
