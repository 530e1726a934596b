"""Benchmark: the training loop's two samplers side by side (`train.sampler`).

In one run, on the same prompts, with the same LoRA adapter (a GRPO-shaped perturbation: B
random, so the adapter changes the policy and a wrong conversion would show):
- torch: transformers on the weights dequantised from the GGUF + the PEFT adapter, every row
  of the round in one batched decode (`Policy.sample`, `train.sampler: torch`);
- llama.cpp: the base Q4_K_M GGUF with the adapter converted to a GGUF LoRA, one row at a
  time, no log-probabilities (`training.llama_policy.LlamaPolicySampler`, the default).

Prints tokens/s of each and their ratio, and that llama.cpp's samples come from the adapted
policy, two ways:
- greedy (temperature 0) on the same prompts: the share of positions, up to each row's first
  disagreement, where llama.cpp + adapter matches torch + adapter, against llama.cpp on the
  bare base (which the adapter moved away from);
- torch's mean log p_adapter - log p_base per token of llama.cpp's temperature-1 samples
  drawn with the adapter (KL(adapted || base) >= 0 in expectation when they come from the
  adapted policy) and without it (-KL(base || adapted) <= 0).

    .venv/bin/python bench/training_sampling.py [--rows 8] [--tokens 128] [--scale 0.05]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import fcntl
import statistics
import sys
import time

from judgelab.env import configure_offline_env

configure_offline_env()

import torch  # noqa: E402

from judgelab.config import HumanEvalSettings, LoraSettings, RolloutSettings  # noqa: E402
from judgelab.hardware import cpu_info  # noqa: E402
from judgelab.models.server import LOCK_PATH  # noqa: E402
from judgelab.rollouts.generate import policy_messages  # noqa: E402
from judgelab.tasks.humaneval import load_humaneval  # noqa: E402
from judgelab.training.llama_policy import LlamaPolicySampler  # noqa: E402
from judgelab.training.policy import Policy, Sample  # noqa: E402

ZOO = "qwen2.5-coder-0.5b-instruct"


def phase(what: str, since: float) -> float:
    """Progress on stderr (a loaded machine can take minutes per phase); returns now."""
    now = time.perf_counter()
    print(f"[{now - since:6.1f} s] {what}", file=sys.stderr, flush=True)
    return now


def agreement(a: list[Sample], b: list[Sample]) -> float:
    """Share of positions, up to each pair's first disagreement, where both drew the same
    token (a pair that agrees throughout counts its shorter length)."""
    same = total = 0
    for x, y in zip(a, b, strict=True):
        n = min(len(x.token_ids), len(y.token_ids))
        k = next((i for i in range(n) if x.token_ids[i] != y.token_ids[i]), n)
        same += k
        total += k + (k < n)
    return same / max(total, 1)


def log_ratio(policy: Policy, prompts: list[list[int]], rows: list[Sample]) -> float:
    """Mean over tokens of log p_adapter - log p_base under torch (T = 1): over samples drawn
    from the adapted policy its expectation is KL(adapted || base) >= 0, over samples drawn
    from the base it is -KL(base || adapted) <= 0."""
    values = []
    with torch.no_grad():
        for prompt, s in zip(prompts, rows, strict=True):
            if not s.token_ids:
                continue
            x = torch.tensor([prompt + s.token_ids])
            span = slice(len(prompt) - 1, -1)
            adapted = policy.sequence_logprobs(x, torch.ones_like(x), start=len(prompt) - 1)
            with policy.model.disable_adapter():
                base = policy.sequence_logprobs(x, torch.ones_like(x), start=len(prompt) - 1)
            values += (adapted[0, span] - base[0, span]).tolist()
    return statistics.fmean(values)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--scale", type=float, default=0.05, help="std of the random LoRA B")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    t = time.perf_counter()
    policy = Policy(ZOO, LoraSettings(), "cpu", dtype=args.dtype, adapters={"judge_0": None})
    with torch.no_grad():
        for name, p in policy.lora_parameters().items():
            if "lora_B" in name:
                p.copy_(torch.randn_like(p) * args.scale)
    tasks = load_humaneval(HumanEvalSettings(offset=100, limit=args.rows))
    prompts = [policy.prompt_ids(policy_messages(RolloutSettings(), t)) for t in tasks]
    n = len(prompts)
    common = {"max_new_tokens": [args.tokens] * n, "seeds": list(range(n))}
    hot, cold = {"temperatures": [1.0] * n}, {"temperatures": [0.0] * n}
    adapters = {"adapters": ["judge_0"] * n}
    t = phase("torch policy loaded", t)
    with open(LOCK_PATH, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # no other llama.cpp process beside this one
        llama = LlamaPolicySampler(policy, args.threads)
        t = phase("lock held", t)
        ll = llama.sample(prompts, **adapters, **hot, **common)
        ll_s = time.perf_counter() - t
        t = phase("llama.cpp + adapter, temperature 1", t)
        ll_greedy = llama.sample(prompts, **adapters, **cold, **common)
        base_greedy = llama.sample_with(None, prompts, **cold, **common)
        base_hot = llama.sample_with(None, prompts, **hot, **common)
        t = phase("llama.cpp greedy and base", t)
    tt = policy.sample(prompts, **adapters, **hot, **common)
    tt_s = time.perf_counter() - t
    t = phase("torch + adapter, temperature 1", t)
    tt_greedy = policy.sample(prompts, **adapters, **cold, **common)
    t = phase("torch greedy", t)
    ll_tok, tt_tok = sum(len(s.token_ids) for s in ll), sum(len(s.token_ids) for s in tt)
    print(f"CPU: {cpu_info().summary()}; policy {ZOO}, torch {args.dtype}, {args.threads} threads")
    print(f"rows {n}, up to {args.tokens} new tokens each, temperature 1")
    print(f"torch batched + PEFT : {tt_tok / tt_s:7.1f} tok/s ({tt_s:.1f} s, {tt_tok} tok)")
    print(f"llama.cpp + GGUF LoRA: {ll_tok / ll_s:7.1f} tok/s ({ll_s:.1f} s, {ll_tok} tok)")
    print(f"ratio llama.cpp / torch: {(ll_tok / ll_s) / (tt_tok / tt_s):.2f}x")
    print(
        f"greedy agreement with torch + adapter: llama.cpp + adapter "
        f"{100 * agreement(ll_greedy, tt_greedy):.1f} %, llama.cpp base "
        f"{100 * agreement(base_greedy, tt_greedy):.1f} %"
    )
    print(
        f"torch: mean log p_adapter - log p_base per token of llama.cpp's samples drawn with "
        f"the adapter {log_ratio(policy, prompts, ll):+.3f} (>= 0 if from the adapted "
        f"policy), without it {log_ratio(policy, prompts, base_hot):+.3f} (<= 0)"
    )


if __name__ == "__main__":
    main()
