"""Benchmark: one batched decode for two judges' policies, against one decode per judge.

`judgelab training` trains every judge in lockstep: each judge's policy is a LoRA adapter on one
base model, and an epoch's rollouts for all judges come from one batched decode with an
adapter per row. Side by side, in one run, on the same prompts, seeds and adapters (the
second adapter perturbed so that the two policies differ):
- per judge: two decodes of 8 rows (4 training samples of one task + 4 held-out prompts),
  one per adapter — what training one judge after the other costs;
- lockstep: one decode of the same 16 rows.

Prints both wall times and the ratio. Also checks that every row drew the same tokens both
ways (rows have their own generators, so batch composition must not change a draw).

    .venv/bin/python bench/lockstep_sampling.py [--tokens 128]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import time

from judgelab.env import configure_offline_env

configure_offline_env()

import torch  # noqa: E402

from judgelab.config import HumanEvalSettings, LoraSettings, RolloutSettings  # noqa: E402
from judgelab.rollouts.generate import policy_messages  # noqa: E402
from judgelab.tasks.humaneval import load_humaneval  # noqa: E402
from judgelab.training.policy import Policy  # noqa: E402

ZOO = "qwen2.5-coder-0.5b-instruct"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    adapters = {"judge_0": None, "judge_1": None}
    policy = Policy(ZOO, LoraSettings(), "cpu", dtype="bfloat16", adapters=adapters)
    with torch.no_grad():
        for name, p in policy.lora_parameters("judge_1").items():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.002)
    tasks = load_humaneval(HumanEvalSettings(offset=1, limit=5))
    prompts = [policy.prompt_ids(policy_messages(RolloutSettings(), t)) for t in tasks]
    rows = [prompts[0]] * 4 + prompts[1:]  # one training group of 4, 4 held-out prompts
    temps = [1.0] * 4 + [0.0] * 4
    seeds = list(range(8))
    tokens = [args.tokens] * 8

    t0 = time.perf_counter()
    apart = []
    for adapter in ("judge_0", "judge_1"):
        apart += policy.sample(
            rows, temperatures=temps, max_new_tokens=tokens, seeds=seeds, adapters=[adapter] * 8
        )
    apart_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    together = policy.sample(
        rows * 2, temperatures=temps * 2, max_new_tokens=tokens * 2, seeds=seeds * 2,
        adapters=["judge_0"] * 8 + ["judge_1"] * 8,
    )  # fmt: skip
    together_s = time.perf_counter() - t0

    same = sum(x.token_ids == y.token_ids for x, y in zip(apart, together, strict=True))
    n = sum(len(s.token_ids) for s in together)
    print(f"16 rows (2 adapters x 8), up to {args.tokens} new tokens each, {n} tokens drawn")
    print(f"one decode per adapter: {apart_s:6.1f} s")
    print(f"one lockstep decode   : {together_s:6.1f} s")
    print(f"ratio lockstep / apart: {together_s / apart_s:.2f}x")
    print(f"rows with identical tokens both ways: {same}/16")


if __name__ == "__main__":
    main()
