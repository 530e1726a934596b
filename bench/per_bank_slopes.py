"""Which exact route to per-bank-task slopes s_ib = <grad l_i, grad F_b> is cheaper? (any device)

The first-order study resamples the bank's tasks (issue 63), so it needs each training
sample's slope on each of the T contrast bank tasks, not only on their mean F. Two routes:

(a) the T gradients grad F_b (one backward over the bank, split by task: what grad F costs),
    then per sample one forward and backward of its l_i, dotted with every grad F_b
    (`training.first_order.bank_task_gradients` + `sample_slopes`): exact;
(b) T directional derivatives, each two forwards over every sample by central differences
    (`directional_slopes`, what the study took for the whole bank before): T times the
    whole-bank slopes' cost, and a finite difference's error.

This script times (a) and one whole-bank (b) pass (which (b) repeats T times) on random
weights at a chosen shape (Qwen2.5-Coder-0.5B's width by default, LoRA r 8 on q/k/v/o as
the study's), with groups of `--k` samples sharing a prompt, as the study's groups do.

    python bench/per_bank_slopes.py --layers 2 [--vocab 151936] [--out results.json]

Results: docs/BENCHMARKS.md (*Per-bank slopes*).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import torch

from judgelab.training.effect import Bank, BankItem
from judgelab.training.first_order import (
    bank_gradient,
    bank_task_gradients,
    directional_slopes,
    sample_slopes,
)


def items(rng: random.Random, vocab: int, tasks: int, per: int, prompt: int, completion: int,
          tag: str) -> list[BankItem]:  # fmt: skip
    out = []
    for t in range(tasks):
        ids = [rng.randrange(10, vocab) for _ in range(prompt)]
        for k in range(per):
            tokens = [rng.randrange(10, vocab) for _ in range(completion)]
            out.append(BankItem(f"{tag}{t}", ids, tokens, k % 2 == 0))
    return out


def model(args: argparse.Namespace) -> Any:
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 2,
        num_hidden_layers=args.layers, num_attention_heads=max(1, args.hidden // 64),
        num_key_value_heads=2, tie_word_embeddings=True,
    )  # fmt: skip
    torch.manual_seed(0)
    base = Qwen2ForCausalLM(config)
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    m = get_peft_model(base, lora)
    with torch.no_grad():  # a trained-looking B, so that the slopes are not all alike
        for name, p in m.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.01)
    return m


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=896)
    ap.add_argument("--vocab", type=int, default=151_936)
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--bank-tasks", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=200)
    ap.add_argument("--completion", type=int, default=100)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rng = random.Random(0)
    bank = Bank(items(rng, args.vocab, args.bank_tasks, 4, args.prompt, args.completion, "b"))
    train = items(rng, args.vocab, args.groups, args.k, args.prompt, args.completion, "t")
    m = model(args)
    params = [p for p in m.parameters() if p.requires_grad]
    t = time.perf_counter()
    _, whole = bank_gradient(m, bank, 0, params)
    t_grad = time.perf_counter() - t
    t = time.perf_counter()
    _, grads = bank_task_gradients(m, bank, 0, params)
    t_grads = time.perf_counter() - t
    t = time.perf_counter()
    fd = directional_slopes(m, train, 0, params, whole, 0.01)
    t_fd = time.perf_counter() - t
    t = time.perf_counter()
    exact = sample_slopes(m, train, 0, params, list(grads.values()))
    t_exact = time.perf_counter() - t
    means = [sum(s) / len(s) for s in exact]
    error = sum(abs(a - b) for a, b in zip(fd, means, strict=True)) / sum(abs(b) for b in means)
    results = {
        "shape": vars(args) | {"out": None},
        "lora_parameters": sum(p.numel() for p in params),
        "threads": torch.get_num_threads(),
        "bank_gradient_s": round(t_grad, 2),
        "bank_task_gradients_s": round(t_grads, 2),
        "whole_bank_slopes_fd_s": round(t_fd, 2),
        "per_bank_slopes_autograd_s": round(t_exact, 2),
        "route_b_estimate_s": round(args.bank_tasks * t_fd, 2),
        "fd_relative_error_vs_autograd": error,
    }
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
