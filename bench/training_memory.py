"""Benchmark: the training stage's peak memory, phase by phase, old path against new.

Each measurement runs in a fresh subprocess (a process's peak RSS only grows), on the default
policy (Qwen2.5-Coder-0.5B, `train.dtype: auto` for this CPU, LoRA defaults):
- `convert`: the one-time GGUF -> safetensors conversion (`policy.converted_dir`), into an
  empty folder of its own;
- `load`: `Policy(...)` from the converted weights;
- `step-whole` / `step-chunked` / `step-checkpointed`: one `grpo_step` on a group of 4 rows of
  a 150-token prompt and 256 completion tokens (`train.k`, `train.max_tokens`): the vocabulary
  projected at once (`whole_projection`: the code before issue 65), `LOGPROB_CHUNK` positions
  at a time, and
  that with gradient checkpointing (`train.gradient_checkpointing`, the default now).

Prints each phase's peak RSS (ru_maxrss) and wall time.

    .venv/bin/python bench/training_memory.py

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

ZOO = "qwen2.5-coder-0.5b-instruct"
PROMPT, COMPLETION, ROWS = 150, 256, 4


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def convert() -> dict[str, float]:
    from judgelab.training.policy import converted_dir

    started = time.perf_counter()
    converted_dir(ZOO)
    return {"peak_mb": peak_mb(), "wall_s": time.perf_counter() - started}


def whole_projection(policy: Any, tokens: Any, attention_mask: Any, start: int = 0,
                     temperature: float = 1.0) -> Any:
    """`Policy.sequence_logprobs` as it was before issue 65: every completion position's
    logits at once, then their log-softmax (the baseline the chunks are measured against)."""
    import torch

    keep = torch.arange(start, tokens.shape[1] - 1, device=tokens.device)
    logits = policy.model(input_ids=tokens, attention_mask=attention_mask,
                          logits_to_keep=keep).logits  # fmt: skip
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    picked = logp.gather(-1, tokens[:, start + 1 :, None])[..., 0]
    return torch.nn.functional.pad(picked, (start, 1), value=0.0)


def step(chunk: str) -> dict[str, float]:
    import torch

    from judgelab.config import LoraSettings
    from judgelab.config.training import LossSettings
    from judgelab.training.grpo import Trajectory, grpo_step
    from judgelab.training.policy import Policy

    started = time.perf_counter()
    policy = Policy(ZOO, LoraSettings(), "cpu", dtype="auto", adapters={"judge_0": None},
                    gradient_checkpointing=chunk == "checkpointed")  # fmt: skip
    loaded = {"load_peak_mb": peak_mb(), "load_s": time.perf_counter() - started}
    if chunk == "whole":
        policy.sequence_logprobs = partial(whole_projection, policy)  # type: ignore[method-assign]
    gen = torch.Generator().manual_seed(0)
    vocab = policy.tokenizer.vocab_size
    prompt = torch.randint(100, vocab, (PROMPT,), generator=gen).tolist()
    trajs = [
        Trajectory(prompt, torch.randint(100, vocab, (COMPLETION,), generator=gen).tolist(),
                   [-1.0] * COMPLETION, (-1.0) ** r, 0)
        for r in range(ROWS)
    ]  # fmt: skip
    opt = torch.optim.AdamW(policy.trainable(), lr=5e-5)
    started = time.perf_counter()
    stats = grpo_step(policy, opt, trajs, LossSettings(), 1.0)
    return {**loaded, "step_peak_mb": peak_mb(), "step_s": time.perf_counter() - started,
            "loss": stats.loss}  # fmt: skip


def child(what: str) -> None:
    from judgelab.env import configure_offline_env

    configure_offline_env()
    out = convert() if what == "convert" else step(what.removeprefix("step-"))
    print(json.dumps(out))


def main() -> None:
    from judgelab.hardware import cpu_info

    print(f"CPU: {cpu_info().summary()}")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        # the conversion writes beside the models folder: an empty one of its own, the
        # assembled GGUFs linked in (their hashes are checked as always)
        from judgelab.paths import models_dir

        models = Path(tmp) / "models"
        models.mkdir()
        for f in models_dir().iterdir():
            (models / f.name).symlink_to(f)
        env = {**os.environ, "JUDGELAB_MODELS": str(models)}
        for what in ("convert", "step-whole", "step-chunked", "step-checkpointed"):
            run = subprocess.run([sys.executable, __file__, "--child", what], env=env,
                                 capture_output=True, text=True, check=True)  # fmt: skip
            results[what] = json.loads(run.stdout.strip().splitlines()[-1])
            print(what, results[what], flush=True)
    whole = results["step-whole"]
    for what in ("step-chunked", "step-checkpointed"):
        r = results[what]
        print(f"{what} against step-whole: step peak {r['step_peak_mb']:.0f} MB against "
              f"{whole['step_peak_mb']:.0f} MB ({r['step_peak_mb'] / whole['step_peak_mb']:.2f}x), "
              f"above the load's peak {r['step_peak_mb'] - r['load_peak_mb']:.0f} MB against "
              f"{whole['step_peak_mb'] - whole['load_peak_mb']:.0f} MB; "
              f"step time {r['step_s']:.1f} s against {whole['step_s']:.1f} s; "
              f"loss {r['loss']:.8f} against {whole['loss']:.8f}")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
