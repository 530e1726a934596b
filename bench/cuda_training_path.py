"""Check and time the torch training path on CUDA against the CPU (run on a machine with a GPU).

Sections (name them on the command line; `checks` is the default):
- `checks`: float32 on the CPU and on CUDA, the same rows, seeds and adapters. A decode of 8
  rows (two adapters, one greedy row), the decode's log-probabilities against a full forward
  (GRPO's importance ratio is exp of their difference: 1 on-policy), one GRPO step from the
  same trajectories, and an adapter saved and loaded on CUDA. Exits 1 when a figure is outside
  its tolerance (FAILED lines name it).
- `det`: the decode twice per dtype on CUDA, run to run (with `--compare-with`, the earlier
  policy module twice as well, and the two against each other, timed side by side).
- `profile`: docs/TRAINING.md's MDE <= 0.15 profile on CUDA at `train.dtype: auto`: one
  lockstep round of 2 x (16 + 176) rows to 256 tokens, and a GRPO step of 16 sequences.
- `cpu`: a fixed workload on 2 cores of the host's CPU, per dtype (24 rows x 64 tokens). Run
  here and on the reference machine, the ratio scales bench/training_profile_epoch.py's
  measured profile to this host's CPU.

Weights: the default policy from the zoo, or with `--random-weights DIR` a config and tokenizer
directory (a converted model's `config.json`, tokenizer files) with seeded random weights, for
a machine the 400 MB GGUF cannot reach. Nothing checked depends on the weights' values; the
timings do: random weights never stop early, so every row runs to its token budget (errs long).
Prompts: the default policy prompts of HumanEval/30-55.

    python bench/cuda_training_path.py checks det profile cpu [--random-weights DIR]
        [--compare-with OLD_POLICY_PY] [--out results.json] [--prompts FILE]

A GPU machine without judgelab's environment needs only torch and the training path's
packages (transformers, peft, pydantic, openpipe-art's `art.loss`): write the prompts where
judgelab is installed (`--write-prompts FILE`, same `--random-weights`) and pass `--prompts`.

`--compare-with` takes an earlier `src/judgelab/training/policy.py`
(`git show <commit>:src/judgelab/training/policy.py > old_policy.py`). Results are recorded in
docs/BENCHMARKS.md and docs/TRAINING.md (*On CUDA*).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

try:
    import polars  # noqa: F401
except ImportError:  # a GPU machine given only the training path's packages: judgelab.io
    sys.modules["polars"] = ModuleType("polars")  # imports polars for tables, unused here

import torch  # noqa: E402

import judgelab.training.policy as pm  # noqa: E402
from judgelab.config import LoraSettings, LossSettings  # noqa: E402
from judgelab.training.grpo import Trajectory, group_advantages, grpo_step, pack  # noqa: E402

ZOO = "qwen2.5-coder-0.5b-instruct"
RESULTS: dict[str, Any] = {}
FAILED: list[str] = []
T0 = time.perf_counter()
GPU = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: a dry run of the logic


def say(key: str, value: Any, out: Path | None = None) -> None:
    RESULTS[key] = value
    print(f"[{time.perf_counter() - T0:6.1f}s] {key}: {value}", flush=True)
    if out is not None:
        out.write_text(json.dumps(RESULTS, indent=1))


def expect(name: str, value: float, limit: float) -> None:
    if not value <= limit:
        FAILED.append(name)
        print(f"FAILED {name}: {value} > {limit}", flush=True)


def sync(empty: bool = False) -> None:
    if GPU == "cuda":
        torch.cuda.synchronize()
        if empty:
            torch.cuda.empty_cache()


def random_model(config_dir: Path) -> Path:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    target = Path(tempfile.mkdtemp()) / "random-weights"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(
        AutoConfig.from_pretrained(config_dir), dtype=torch.float32
    )
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(config_dir).save_pretrained(target)
    return target


def policy(device: str, dtype: str, adapters: dict[str, Path] | None = None) -> Any:
    """Two adapters from fixed seeds, the second moved off the base model (as after a first
    step), identical on every device; or saved adapters."""
    names = ("judge_0", "judge_1")
    p = pm.Policy(ZOO, LoraSettings(), device, dtype=dtype,
                  adapters=adapters or dict.fromkeys(names))  # fmt: skip
    if adapters is None:
        for i, name in enumerate(names):
            p.init_adapter(name, seed=i)
        gen = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for name, w in sorted(p.lora_parameters(names[1]).items()):
                if "lora_B" in name:
                    w.copy_((torch.randn(w.shape, generator=gen) * 0.02).to(w.device, w.dtype))
    return p


def trajectories(rows: list, drawn: list, rewards: list[float]) -> list[Trajectory]:
    adv: list[float] = []
    for g in range(0, len(rewards), 4):
        adv += group_advantages(rewards[g : g + 4])
    return [Trajectory(rows[i], s.token_ids, s.logprobs, adv[i], i // 4)
            for i, s in enumerate(drawn)]  # fmt: skip


def step(p: Any, batch: list[Trajectory]) -> tuple[Any, float, dict, dict]:
    p.use("judge_0")
    opt = torch.optim.AdamW(p.trainable(), lr=5e-5, weight_decay=0.0)
    before = {k: v.detach().float().cpu().clone() for k, v in p.adapter_state("judge_0").items()}
    sync()
    t = time.perf_counter()
    stats = grpo_step(p, opt, batch, LossSettings(), 1.0, 1.0)
    sync()
    took = time.perf_counter() - t
    after = {k: v.detach().float().cpu() for k, v in p.adapter_state("judge_0").items()}
    return stats, took, before, after


def decode_vs_forward(p: Any, batch: list[Trajectory]) -> float:
    """Max |decode log-prob - full-forward log-prob| over the completion tokens, at T = 1."""
    inputs = {k: v.to(p.device) for k, v in pack(batch, p.pad_id).items()}
    first = min(len(t.prompt_ids) for t in batch) - 1
    p.use("judge_0")
    p.model.eval()
    with torch.no_grad():
        new = p.sequence_logprobs(inputs["tokens"], inputs["attention_mask"], start=first)
    worst = 0.0
    for i, t in enumerate(batch):
        start = len(t.prompt_ids) - 1
        got = new[i, start : start + len(t.completion_ids)].float().cpu()
        worst = max(worst, (got - torch.tensor(t.logprobs)).abs().max().item())
    return worst


def rounds(prompts: list, train: int, heldout: int) -> tuple[list, list[str]]:
    """Per adapter `train` groups of 4 and `heldout` prompts of 8 draws, two adapters."""
    per = [i for i in range(train) for _ in range(4)]
    per += [train + j for j in range(heldout) for _ in range(8)]
    return [prompts[i] for i in per] * 2, ["judge_0"] * len(per) + ["judge_1"] * len(per)


def checks(prompts: list, out: Path | None) -> None:
    rows = [prompts[0]] * 4 + [prompts[1]] * 4
    kw = dict(temperatures=[1.0] * 7 + [0.0], max_new_tokens=[24] * 8, seeds=list(range(8)),
              adapters=["judge_0"] * 4 + ["judge_1"] * 4)  # fmt: skip
    pc = policy("cpu", "float32")
    dc = pc.sample(rows, **kw)
    pg = policy(GPU, "float32")
    dg = pg.sample(rows, **kw)
    same = [a.token_ids == b.token_ids for a, b in zip(dc, dg, strict=True)]
    say("f32_rows_identical_cpu_vs_gpu", f"{sum(same)}/8", out)
    diff = max((abs(x - y) for a, b, s in zip(dc, dg, same, strict=True) if s
                for x, y in zip(a.logprobs, b.logprobs, strict=True)), default=0.0)  # fmt: skip
    say("f32_max_logprob_diff_cpu_vs_gpu", diff, out)
    expect("f32_max_logprob_diff_cpu_vs_gpu", diff, 1e-4)
    batch = trajectories(rows[:4], dc[:4], [1.0, 0.0, 0.0, 1.0])
    for name, p in (("cpu", pc), ("gpu", pg)):
        worst = decode_vs_forward(p, batch)
        say(f"f32_decode_vs_forward_{name}", worst, out)
        expect(f"f32_decode_vs_forward_{name}", worst, 1e-4)
    sc, _, b0, a0 = step(pc, batch)
    sg, _, b1, a1 = step(pg, batch)
    say("f32_step_cpu", vars(sc), out)
    say("f32_step_gpu", vars(sg), out)
    expect("f32_step_loss_diff", abs(sc.loss - sg.loss), 1e-5 + 1e-4 * abs(sc.loss))
    expect("f32_step_grad_norm_rel_diff", abs(sc.grad_norm - sg.grad_norm) / sc.grad_norm, 1e-4)
    expect("f32_adapters_before_step_diff", max((b0[k] - b1[k]).abs().max().item() for k in b0), 0)
    moved = torch.cat([((a0[k] - b0[k]) - (a1[k] - b1[k])).flatten() for k in a0])
    off = int((moved.abs() > 2.5e-5).sum())  # Adam's first step: lr * sign(g), lr 5e-5
    say("f32_step_update_entries_differing", f"{off}/{moved.numel()}", out)
    expect("f32_step_update_entries_differing_share", off / moved.numel(), 1e-3)
    with tempfile.TemporaryDirectory() as d:
        pg.save_adapter(Path(d) / "a", "judge_0")
        again = policy(GPU, "float32", adapters={"judge_0": Path(d) / "a"})
        ok = again.adapter_hash("judge_0") == pg.adapter_hash("judge_0")
        say("gpu_adapter_save_load_same_hash", ok, out)
        expect("gpu_adapter_save_load_mismatch", 0 if ok else 1, 0)
    del pc, pg, again
    sync(empty=True)


def det(prompts: list, old: ModuleType | None, out: Path | None) -> None:
    rows, adapters = rounds(prompts, 4, 4)
    kw = dict(temperatures=[1.0] * len(rows), max_new_tokens=[32] * len(rows),
              seeds=list(range(len(rows))), adapters=adapters)  # fmt: skip
    labels = ("new", "old", "new2", "old2") if old else ("new", "new2")
    for dtype in ("float32", "auto"):
        p = policy(GPU, dtype)
        got: dict[str, Any] = {}
        for label in labels:
            p.__class__ = old.Policy if old and label.startswith("old") else pm.Policy
            sync()
            t = time.perf_counter()
            got[label] = p.sample(rows, **kw)
            sync()
            got[label + "_s"] = round(time.perf_counter() - t, 2)
        p.__class__ = pm.Policy

        pairs = [("new", "new2")] + ([("old", "old2"), ("new", "old")] if old else [])
        same = {}
        for a, b in pairs:
            n = sum(x.token_ids == y.token_ids for x, y in zip(got[a], got[b], strict=True))
            same[f"{a}_vs_{b}"] = f"{n}/{len(rows)}"
        say(f"det_{p.dtype}", {**same,
                               "seconds": {k: got[k + "_s"] for k in labels}}, out)  # fmt: skip
        del p
        sync(empty=True)


def profile(prompts: list, out: Path | None) -> None:
    p = policy(GPU, "auto")
    rows, adapters = rounds(prompts, 4, 22)
    sync()
    t = time.perf_counter()
    drawn = p.sample(rows, temperatures=[1.0] * len(rows), max_new_tokens=[256] * len(rows),
                     seeds=list(range(len(rows))), adapters=adapters)  # fmt: skip
    sync()
    round_s = time.perf_counter() - t
    peak = torch.cuda.max_memory_allocated() / 2**30 if GPU == "cuda" else None
    say("profile_round", {"dtype": p.dtype, "rows": len(rows), "seconds": round(round_s, 2),
                          "tokens": sum(len(s.token_ids) for s in drawn),
                          "peak_gib": peak and round(peak, 2)}, out)  # fmt: skip
    batch = trajectories(rows[:16], drawn[:16], [1.0, 0.0, 0.0, 1.0] * 4)
    say(f"{p.dtype}_decode_vs_forward", decode_vs_forward(p, batch), out)
    stats, step_s, _, _ = step(p, batch)
    say("profile_grpo_step_16", {**vars(stats), "seconds": round(step_s, 2)}, out)
    say("profile_epoch_torch_s", round(round_s + 2 * step_s, 1), out)


def cpu(prompts: list, out: Path | None) -> None:
    os.sched_setaffinity(0, set(sorted(os.sched_getaffinity(0))[:2]))
    torch.set_num_threads(2)
    rows, adapters = rounds(prompts, 1, 1)
    for dtype in ("auto", "float32"):
        p = policy("cpu", dtype)
        t = time.perf_counter()
        drawn = p.sample(rows, temperatures=[1.0] * len(rows), max_new_tokens=[64] * len(rows),
                         seeds=list(range(len(rows))), adapters=adapters)  # fmt: skip
        say(f"cpu2_{dtype}", {"dtype": p.dtype, "rows": len(rows),
                              "tokens": sum(len(s.token_ids) for s in drawn),
                              "sample_s": round(time.perf_counter() - t, 2)}, out)  # fmt: skip
        del p


def humaneval_prompts(tokenizer_dir: Path) -> list[list[int]]:
    """The default policy's prompts of HumanEval/30-55, as token ids."""
    from transformers import AutoTokenizer

    from judgelab.config import HumanEvalSettings, RolloutSettings
    from judgelab.rollouts.generate import policy_messages
    from judgelab.tasks.humaneval import load_humaneval

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    out = []
    for task in load_humaneval(HumanEvalSettings(offset=30, limit=26)):
        messages = policy_messages(RolloutSettings(), task)
        ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        out.append([int(t) for t in (ids["input_ids"] if hasattr(ids, "keys") else ids)])
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sections", nargs="*", help="checks (default), det, profile, cpu")
    ap.add_argument("--random-weights", type=Path)
    ap.add_argument("--compare-with", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--write-prompts", type=Path, help="write the prompts' token ids and stop")
    ap.add_argument("--prompts", type=Path, help="read them (a machine without the task "
                    "sources' and rollouts' packages)")  # fmt: skip
    args = ap.parse_args()
    if unknown := set(args.sections) - {"checks", "det", "profile", "cpu"}:
        ap.error(f"unknown sections {sorted(unknown)}: checks, det, profile, cpu")

    say("torch", torch.__version__)
    say("gpu", torch.cuda.get_device_name(0) if GPU == "cuda" else None)
    info = Path("/proc/cpuinfo").read_text().splitlines()
    name = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), "?")
    flags = next((ln for ln in info if ln.startswith("flags")), "").split()
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_tile")
    say("host_cpu", f"{name}; " + " ".join(f for f in wanted if f in flags))
    if args.prompts:
        prompts = json.loads(args.prompts.read_text())
    else:
        prompts = humaneval_prompts(args.random_weights or pm.converted_dir(ZOO))
    if args.write_prompts:
        args.write_prompts.write_text(json.dumps(prompts))
        return
    if args.random_weights:
        model_dir = random_model(args.random_weights)
        pm.converted_dir = lambda zoo: model_dir
    old = None
    if args.compare_with:
        spec = importlib.util.spec_from_file_location("old_policy", args.compare_with)
        assert spec and spec.loader
        old = importlib.util.module_from_spec(spec)
        sys.modules["old_policy"] = old
        spec.loader.exec_module(old)
        old.converted_dir = pm.converted_dir
    for section in args.sections or ["checks"]:
        if section == "checks":
            checks(prompts, args.out)
        elif section == "det":
            det(prompts, old, args.out)
        elif section == "profile":
            profile(prompts, args.out)
        else:
            cpu(prompts, args.out)
    say("failed", FAILED, args.out)
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
