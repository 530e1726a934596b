"""Benchmark: what one epoch of docs/TRAINING.md's measurable-effect profile costs on this CPU.

The profile (`train.epochs: 4`, `groups_per_epoch: 4`, `k: 4`, two judges in lockstep,
`heldout: {pool: 96, limit: 22, samples: 8}`) draws 2 x (16 + 176) = 384 rows an epoch in one
batched decode, takes one GRPO step of 16 sequences per judge and runs the tests on 2 x 26
groups. Running it takes hours, so this measures its parts at a smaller width, with the
profile's sampling settings (temperature 1, up to 256 new tokens, `train.dtype: auto`):

- one lockstep round of `--rows` rows per adapter (two adapters, the second perturbed so the
  policies differ, as after the first step): `--groups` training groups of 4 and held-out
  prompts of 8 draws each, on HumanEval prompts;
- one GRPO step on `--step` of the drawn sequences (advantages +1/-1 alternately), scaled
  to the profile's 16;
- the sandboxed tests on every drawn held-out group (the execution judge).

Prints each part's time, per row and per group, and the profile's epoch extrapolated
linearly from them (rows x per-row time: per-row cost falls with batch width on CPU, so the
extrapolation errs long). RULER's calls are not measured here (docs/TRAINING.md's measured
27-46 s per call of the 1.5B judge on an AVX2 EPYC applies).

    flock /tmp/judgelab-model.lock .venv/bin/python bench/training_profile_epoch.py

Results are recorded in docs/TRAINING.md (*A longer run*).
"""

from __future__ import annotations

import argparse
import platform
import time

from judgelab.env import configure_offline_env

configure_offline_env()

import torch  # noqa: E402

from judgelab.config import (  # noqa: E402
    HumanEvalSettings,
    LoraSettings,
    LossSettings,
    RolloutSettings,
)
from judgelab.config.evaluators import ExecutionSettings  # noqa: E402
from judgelab.evaluators.execution import ExecutionEvaluator  # noqa: E402
from judgelab.rollouts.generate import policy_messages  # noqa: E402
from judgelab.tasks.humaneval import load_humaneval  # noqa: E402
from judgelab.training.grpo import Trajectory, grpo_step  # noqa: E402
from judgelab.training.policy import Policy  # noqa: E402
from judgelab.training.sampler import candidates  # noqa: E402

ZOO = "qwen2.5-coder-0.5b-instruct"
# the profile, per epoch after the first: rows, GRPO steps (16 sequences), test groups
PROFILE_ROWS = 2 * (4 * 4 + 22 * 8)
PROFILE_STEPS = 2
PROFILE_TEST_GROUPS = 2 * (4 + 22)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=1, help="training groups of 4 per adapter")
    ap.add_argument("--heldout", type=int, default=1, help="held-out prompts of 8 per adapter")
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--step", type=int, default=8, help="sequences in the measured GRPO step")
    args = ap.parse_args()
    torch.set_num_threads(2)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    policy = Policy(ZOO, LoraSettings(), "cpu", dtype="auto",
                    adapters={"judge_0": None, "judge_1": None})  # fmt: skip
    load_s = time.perf_counter() - t0
    print(f"python {platform.python_version()}, torch {torch.__version__}, dtype {policy.dtype}")
    print(f"load: {load_s:.1f} s", flush=True)
    with torch.no_grad():
        for name, p in policy.lora_parameters("judge_1").items():
            if "lora_B" in name:
                p.add_(torch.randn_like(p) * 0.002)
    tasks = load_humaneval(HumanEvalSettings(offset=30, limit=args.groups + args.heldout))
    messages = [policy_messages(RolloutSettings(), t) for t in tasks]
    prompts = [policy.prompt_ids(m) for m in messages]
    per_adapter = [i for i in range(args.groups) for _ in range(4)] + [
        args.groups + j for j in range(args.heldout) for _ in range(8)
    ]
    rows = [prompts[i] for i in per_adapter] * 2
    adapters = ["judge_0"] * len(per_adapter) + ["judge_1"] * len(per_adapter)
    t0 = time.perf_counter()
    drawn = policy.sample(rows, temperatures=[1.0] * len(rows),
                          max_new_tokens=[args.tokens] * len(rows),
                          seeds=list(range(len(rows))), adapters=adapters)  # fmt: skip
    sample_s = time.perf_counter() - t0
    tokens = sum(len(s.token_ids) for s in drawn)
    per_row = sample_s / len(rows)
    print(f"round: {len(rows)} rows (2 adapters x {len(per_adapter)}), {tokens} tokens drawn, "
          f"{sample_s:.1f} s = {per_row:.2f} s a row", flush=True)  # fmt: skip

    batch = [Trajectory(rows[i], s.token_ids, s.logprobs, 1.0 if i % 2 else -1.0, i // 4)
             for i, s in enumerate(drawn[: args.step])]  # fmt: skip
    policy.use("judge_0")
    optimizer = torch.optim.AdamW(policy.trainable(), lr=5e-5, weight_decay=0.0)
    t0 = time.perf_counter()
    grpo_step(policy, optimizer, batch, LossSettings(), 1.0, 1.0)
    step_s = (time.perf_counter() - t0) * 16 / len(batch)  # a step's cost is linear in them
    print(f"GRPO step, {len(batch)} sequences: {step_s * len(batch) / 16:.1f} s "
          f"(16: {step_s:.1f} s)", flush=True)  # fmt: skip

    judge = ExecutionEvaluator(ExecutionSettings(name="execution"))
    held = [(args.groups + j, drawn[len(per_adapter) - 8 * (args.heldout - j):][:8])
            for j in range(args.heldout)]  # fmt: skip
    t0 = time.perf_counter()
    for i, group in held:
        judge.score_group(tasks[i], candidates(tasks[i], messages[i], group, "bench"))
    tests_s = (time.perf_counter() - t0) / len(held)

    epoch = PROFILE_ROWS * per_row + PROFILE_STEPS * step_s + PROFILE_TEST_GROUPS * tests_s
    print(f"tests, one held-out group of 8 (sandbox): {tests_s:.1f} s")
    print(f"profile epoch ({PROFILE_ROWS} rows, {PROFILE_STEPS} steps, {PROFILE_TEST_GROUPS} "
          f"test groups; RULER calls not included): {epoch / 60:.1f} min")  # fmt: skip


if __name__ == "__main__":
    main()
