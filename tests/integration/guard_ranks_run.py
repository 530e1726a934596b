"""Run by tests/integration/test_guard_trl_ranks.py under `accelerate launch --num_processes 2`
(gloo, CPU): one GRPOTrainer run over two processes with the guard, groups straddling the
ranks, then two bad batches; each rank writes what it saw to OUT/rank<r>.json.

    accelerate launch --multi_gpu --num_processes 2 guard_ranks_run.py MODEL_DIR OUT

The run: 3 prompts a step x 4 generations = 12 completions a step, 6 a rank, so prompt 1's group is
rank 0's rows 4..5 and rank 1's rows 0..1. The truth is a stand-in for tests (a completion
passes when the sum of its characters' codes is even: a fair coin fixed by the text, the same
on every rank); `anti` pays for failing, `brevity` for short answers, weighted 1 and 0.1, so
the reward TRL trains on pays for failing code and the guard must stop the run on every rank
at the same step, with a checkpoint.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def passed(key: object, text: str) -> bool:
    return sum(map(ord, text)) % 2 == 0


def anti(prompts: list, completions: list, **kwargs: object) -> list[float]:
    return [1.0 - passed(p, c) for p, c in zip(prompts, completions, strict=True)]


def brevity(prompts: list, completions: list, **kwargs: object) -> list[float]:
    return [-len(c) / 100 for c in completions]


def bad_batches(args: object) -> dict[str, str]:
    """Two batches whose groups cannot be formed, on both ranks at once: what each rank
    raised (the same error must reach both, and neither may hang)."""
    from transformers.trainer_callback import TrainerControl, TrainerState

    from judgelab.guard import Guard
    from judgelab.guard.ranks import ranks
    from judgelab.guard.trl import trl_guard

    rank = ranks().rank
    prompts = ["a"] * 4 + ["b"] * 2 if rank == 0 else ["b"] * 2 + ["c"] * 4
    texts = [f"{rank}{i}{'x' * i}" for i in range(6)]  # every group has reward spread
    out: dict[str, str] = {}

    def only_a(key: object, text: str) -> bool:
        return {"a": passed}[key](key, text)  # type: ignore[index]

    args.reward_weights = None  # type: ignore[attr-defined] # one function here
    for name, verdict, k in (("missing_verdict", only_a, 4), ("num_generations", passed, 5)):
        reward, callback = trl_guard(Guard(), anti, verdict)
        args.num_generations = k  # type: ignore[attr-defined]
        state = TrainerState(global_step=7)
        callback.on_train_begin(args, TrainerState(), TrainerControl())
        try:
            reward(prompts=prompts, completions=texts, trainer_state=state)
            out[name] = "no error"
        except Exception as e:  # noqa: BLE001 - what each rank raised is the result
            out[name] = f"{type(e).__name__}: {e}"
    return out


def main(model_dir: str, out: Path) -> None:
    import torch

    torch.set_num_threads(1)  # two processes on a shared 2-core host
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    from judgelab.guard import Guard, GuardSettings
    from judgelab.guard.trl import trl_guard

    seen: list[list[str]] = []

    def judge(prompts: list, completions: list, **kwargs: object) -> list[float]:
        seen.append(list(prompts))
        return anti(prompts, completions)

    judge.__name__ = "anti"
    guard = Guard(GuardSettings(alpha=0.05))
    rewards, callback = trl_guard(guard, [judge, brevity], passed, action="stop")
    args = GRPOConfig(
        output_dir=str(out / "run"), use_cpu=True, bf16=False, report_to=[], seed=0,
        num_generations=4, per_device_train_batch_size=6, max_completion_length=4,
        max_steps=4, logging_steps=1, save_strategy="no", reward_weights=[1.0, 0.1],
        save_only_model=True,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    prompts = [f"Name a number ({i}):" for i in range(24)]  # a group per prompt
    trainer = GRPOTrainer(model=model, reward_funcs=rewards, callbacks=[callback], args=args,
                          train_dataset=Dataset.from_dict({"prompt": prompts}))  # fmt: skip
    trainer.train()
    rank = trainer.accelerator.process_index
    status = guard.status()
    result = {
        "rank": rank,
        "world": trainer.accelerator.num_processes,
        "backend": torch.distributed.get_backend(),
        "global_step": trainer.state.global_step,
        "stopped_at": callback.stopped_at,
        "record": vars(callback.record),
        "first_slice": seen[0],
        "guard": {
            "groups": status.groups,
            "completions": status.completions,
            "checked": status.checked_groups,
            "fired_at": status.fired_at_step,
        },  # fmt: skip
        "logged": [row for row in trainer.state.log_history if "guard/evalue" in row],
        "bad": bad_batches(args),
    }
    (out / f"rank{rank}.json").write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
