"""Benchmark: where should the training loop sample the current policy from?

Side by side, in one run, on the same prompts, with the same LoRA adapter:
- transformers (fp32 weights dequantised from the GGUF + the PEFT adapter), all rows of a
  round in one batch — what `judgelab training` does;
- llama.cpp on the base Q4_K_M GGUF with the adapter exported as a GGUF LoRA
  (`judgelab checkpoint export`), one row at a time (llama.cpp decodes one sequence).

Prints tokens/s for each and the ratio, and the off-policy gap of the llama.cpp path: the
transformers (training) log-probability of every token llama.cpp drew, against llama.cpp's
own, as mean |Δ| and the share of tokens whose ratio exp(Δ) leaves PPO's [0.8, 1.2].
The adapter is a real GRPO-shaped perturbation (random B) so that a wrong export shows up as
a larger gap than the base model's.

    .venv/bin/python bench/training_sampling.py [--rows 8] [--tokens 96]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import statistics
import tempfile
import time
from pathlib import Path

from judgelab.env import configure_offline_env

configure_offline_env()

import torch  # noqa: E402

from judgelab.config import (  # noqa: E402
    HumanEvalSettings,  # noqa: E402
    LoraSettings,
    RolloutSettings,
)
from judgelab.models.server import LOCK_PATH  # noqa: E402
from judgelab.models.zoo import ensure_model  # noqa: E402
from judgelab.rollouts.generate import policy_messages  # noqa: E402
from judgelab.tasks.humaneval import load_humaneval  # noqa: E402
from judgelab.training.export import export_gguf_adapter  # noqa: E402
from judgelab.training.policy import Policy, converted_dir  # noqa: E402

ZOO = "qwen2.5-coder-0.5b-instruct"


def llama_rows(llm, prompts, tokens, seed):  # noqa: ANN001, ANN201
    out = []
    for i, p in enumerate(prompts):
        r = llm.create_completion(
            prompt=p, max_tokens=tokens, temperature=1.0, top_p=1.0, top_k=0, min_p=0.0,
            seed=seed + i, logprobs=1,
        )  # fmt: skip
        lp = r["choices"][0]["logprobs"]
        ids = [llm.tokenize(t.encode(), add_bos=False, special=True) for t in lp["tokens"]]
        out.append((sum(ids, []), lp["token_logprobs"], r["usage"]["completion_tokens"]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)

    policy = Policy(ZOO, LoraSettings(), "cpu")
    with torch.no_grad():
        for name, p in policy.lora_parameters().items():
            if "lora_B" in name:
                p.copy_(torch.randn_like(p) * 0.02)
    tasks = load_humaneval(HumanEvalSettings(offset=100, limit=args.rows))
    rollout = RolloutSettings()
    prompts = [policy.prompt_ids(policy_messages(rollout, t)) for t in tasks]

    with tempfile.TemporaryDirectory() as tmp, open(LOCK_PATH, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # no other llama.cpp process beside this one
        adapter_dir = Path(tmp) / "adapter"
        policy.save_adapter(adapter_dir)
        config = json.loads((converted_dir(ZOO) / "config.json").read_text())
        gguf_adapter = export_gguf_adapter(
            adapter_dir, Path(tmp) / "adapter.gguf", config["model_type"],
            config["num_hidden_layers"],
        )  # fmt: skip

        t0 = time.perf_counter()
        hf = policy.sample(
            prompts, temperatures=[1.0] * len(prompts),
            max_new_tokens=[args.tokens] * len(prompts),
            seeds=[args.seed + i for i in range(len(prompts))],
        )  # fmt: skip
        hf_s = time.perf_counter() - t0
        hf_tokens = sum(len(s.token_ids) for s in hf)

        from llama_cpp import Llama

        gaps = {}
        for label, lora in (("base", None), ("adapter", str(gguf_adapter))):
            llm = Llama(
                model_path=str(ensure_model(ZOO)), lora_path=lora, n_ctx=2048, n_threads=2,
                verbose=False, logits_all=True,
            )  # fmt: skip
            t0 = time.perf_counter()
            rows = llama_rows(llm, prompts, args.tokens, args.seed)
            ll_s = time.perf_counter() - t0
            ll_tokens = sum(n for _, _, n in rows)
            del llm
            if label == "base":
                with torch.no_grad(), policy.model.disable_adapter():
                    gaps[label] = gap(policy, prompts, rows)
            else:
                gaps[label] = gap(policy, prompts, rows)
                speed = (ll_tokens / ll_s, ll_s)
        fcntl.flock(lock, fcntl.LOCK_UN)

    print(f"rows {len(prompts)}, up to {args.tokens} new tokens each")
    print(f"transformers batched : {hf_tokens / hf_s:7.1f} tok/s ({hf_s:.1f} s, {hf_tokens} tok)")
    print(f"llama.cpp + GGUF LoRA: {speed[0]:7.1f} tok/s ({speed[1]:.1f} s)")
    print(f"ratio llama.cpp / transformers: {speed[0] / (hf_tokens / hf_s):.2f}x")
    for label, (mean_abs, outside, n) in gaps.items():
        print(
            f"off-policy gap, {label:7s}: mean |Δ logprob| {mean_abs:.3f}, "
            f"{100 * outside:.1f} % of {n} tokens outside PPO's [0.8, 1.2]"
        )


def gap(policy: Policy, prompts: list[list[int]], rows: list) -> tuple[float, float, int]:  # noqa: ANN001
    diffs = []
    with torch.no_grad():
        for prompt, (ids, lps, _) in zip(prompts, rows, strict=True):
            n = min(len(ids), len(lps))
            if n == 0:
                continue
            x = torch.tensor([prompt + ids[:n]])
            new = policy.sequence_logprobs(x, torch.ones_like(x))[0, len(prompt) - 1 : -1]
            diffs += [float(a - b) for a, b in zip(new.tolist(), lps[:n], strict=True)]
    outside = [d for d in diffs if not (0.8 <= pow(2.718281828, d) <= 1.2)]
    return statistics.fmean(abs(d) for d in diffs), len(outside) / len(diffs), len(diffs)


if __name__ == "__main__":
    main()
