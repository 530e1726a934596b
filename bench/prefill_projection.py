"""Benchmark: the policy's prefill with and without a contiguous input to the vocabulary projection.

`judgelab training` prefills every round's prompts with ``logits_to_keep=1``; transformers then
hands the vocabulary projection a strided slice of the hidden states, and torch's matmul
broadcasts the whole [hidden, vocab] weight per row and copies it. `Policy` registers a
pre-hook that makes the input contiguous. Side by side, in one run, on the same model, rows
and tokens: the prefill without the hook and with it, the ratio, and the largest difference
between the two logits (they must agree).

    .venv/bin/python bench/prefill_projection.py [--rows 4] [--tokens 400]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import time

from judgelab.env import configure_offline_env

configure_offline_env()

import torch  # noqa: E402

from judgelab.config import LoraSettings  # noqa: E402
from judgelab.training.policy import Policy  # noqa: E402

ZOO = "qwen2.5-coder-0.5b-instruct"


def prefill(policy: Policy, ids: torch.Tensor, repeats: int) -> tuple[float, torch.Tensor]:
    seconds = []
    with torch.no_grad():
        for _ in range(repeats):
            start = time.perf_counter()
            out = policy.model(input_ids=ids, use_cache=True, logits_to_keep=1)
            seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), out.logits.float()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    policy = Policy(ZOO, LoraSettings(), "cpu", dtype="bfloat16")
    policy.model.eval()
    ids = torch.randint(0, 20000, (args.rows, args.tokens))
    head = policy.model.get_output_embeddings()
    hooks = dict(head._forward_pre_hooks)
    head._forward_pre_hooks.clear()
    strided, a = prefill(policy, ids, args.repeats)
    head._forward_pre_hooks.update(hooks)
    contiguous, b = prefill(policy, ids, args.repeats)
    print(
        f"prefill {args.rows} x {args.tokens} tokens: strided input {strided:.2f} s, "
        f"contiguous {contiguous:.2f} s ({contiguous / strided:.2f}x); "
        f"max |logit difference| {float((a - b).abs().max()):.2e}"
    )


if __name__ == "__main__":
    main()
