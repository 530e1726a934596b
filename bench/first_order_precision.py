"""Does the first-order study's central difference survive the training dtype? (any device)

`judgelab study --method first-order` takes each training sample's slope s_i = <grad l_i, grad F>
by central differences along the bank's gradient in the LoRA parameters
(`training.first_order.directional_slopes`). A fresh adapter's B is 0, so the difference the
two forwards must resolve is the LoRA branch's tiny output added to the base model's. This
script computes the slopes with the product's functions in float32 and in bfloat16 and sets
each against autograd's exact directional derivative (float32, one backward per sample), on
Qwen2.5-Coder-0.5B's shape with seeded random weights (no download; nothing here depends on
the weights' values but the magnitudes) and random token sequences.

    python bench/first_order_precision.py [--device cuda] [--layers 24] [--out results.json]
        [--lora-in-base-dtype]

The LoRA weights are float32 beside either base dtype, as `training.policy.Policy` holds
them; `--lora-in-base-dtype` casts them with the base (the H200 run in docs/BENCHMARKS.md).

`--layers 2 --vocab 2000 --hidden 128` is a quick dry run on a CPU. Results: docs/BENCHMARKS.md
(*The first-order study's precision*).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from judgelab.training.effect import Bank, BankItem, shared_prompt_means
from judgelab.training.first_order import bank_gradient, directional_slopes


def items(rng: random.Random, vocab: int, tasks: int, per: int, prompt: int, completion: int,
          tag: str) -> list[BankItem]:  # fmt: skip
    out = []
    for t in range(tasks):
        ids = [rng.randrange(10, vocab) for _ in range(prompt)]
        for k in range(per):
            tokens = [rng.randrange(10, vocab) for _ in range(completion)]
            out.append(BankItem(f"{tag}{t}", ids, tokens, k % 2 == 0))
    return out


def model(args: argparse.Namespace, dtype: torch.dtype) -> Any:
    """The same seeded base weights and adapter on every call, in `dtype`."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 2,
        num_hidden_layers=args.layers, num_attention_heads=max(1, args.hidden // 64),
        num_key_value_heads=2, tie_word_embeddings=True, rope_theta=1_000_000.0,
    )  # fmt: skip
    torch.manual_seed(0)
    base = Qwen2ForCausalLM(config)  # initialised on the CPU: the same weights every call
    torch.manual_seed(1)  # the adapter's A; B starts at 0 (peft's default), as in the study
    lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    model = get_peft_model(base, lora).to(device=args.device, dtype=dtype)
    if not args.lora_in_base_dtype:  # as `Policy` holds them: float32 beside any base dtype
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.data = p.data.float()
    return model


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=896)
    ap.add_argument("--vocab", type=int, default=151_936)
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--fd-step", type=float, default=0.01)
    ap.add_argument(
        "--lora-in-base-dtype",
        action="store_true",
        help="LoRA weights in the base's dtype (the product keeps them float32)",
    )
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rng = random.Random(0)
    bank = Bank(items(rng, args.vocab, 8, 4, 200, 100, "bank"))
    train = items(rng, args.vocab, args.samples // 4, 4, 200, 100, "train")
    results: dict[str, Any] = {"device": args.device, "shape": vars(args) | {"out": None}}
    if args.device.startswith("cuda"):
        results["gpu"] = torch.cuda.get_device_name()
    results["torch"] = torch.__version__
    slopes: dict[str, np.ndarray] = {}
    for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        m = model(args, dtype)
        params = [p for p in m.parameters() if p.requires_grad]
        sync(args.device)
        t = time.perf_counter()
        value, grad = bank_gradient(m, bank, 0, params)
        sync(args.device)
        t_grad = time.perf_counter() - t
        t = time.perf_counter()
        s = directional_slopes(m, train, 0, params, grad, args.fd_step)
        sync(args.device)
        t_slopes = time.perf_counter() - t
        slopes[name] = np.array(s)
        results[name] = {"F": value, "bank_gradient_s": round(t_grad, 3),
                         "slopes_s": round(t_slopes, 3)}  # fmt: skip
        if name == "float32":
            exact = []
            for it in train:
                for p in params:
                    p.grad = None
                mean = shared_prompt_means(m, it.prompt_ids, [it.completion_ids], 0)[0]
                mean.backward()
                exact.append(sum(float((p.grad.double() * g.double()).sum())
                                 for p, g in zip(params, grad, strict=True)))  # fmt: skip
            slopes["exact"] = np.array(exact)
        del m
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    exact = slopes["exact"]
    for name in ("float32", "bfloat16"):
        got = slopes[name]
        results[name] |= {
            "relative_error": float(np.abs(got - exact).sum() / np.abs(exact).sum()),
            "correlation": float(np.corrcoef(got, exact)[0, 1]),
            "sign_agreement": float(np.mean(np.sign(got) == np.sign(exact))),
        }
    results["exact_mean_abs"] = float(np.abs(exact).mean())
    text = json.dumps(results, indent=1)
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
