"""Inputs for the optional report sections, in the layout their stages write."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from judgelab.io import write_parquet


def write_training_histories(
    training_dir: Path, judges: tuple[str, ...], seeds: tuple[int, ...] = ()
) -> None:
    """`<judge>/history.parquet` + `samples.parquet` as the training stage writes them:
    epochs 0..4, two training samples and two held-out tasks (HumanEval/2, /3) per epoch; the
    judge's reward rises every epoch, by 0.2 at epoch 3, while the same samples' test pass
    rate falls from 0.5 to 0 and held-out passes fall too (epoch 3 is a reward-hacking epoch).

    With `seeds`, the same under `<judge>/seed-<s>/` for the first seed; every later seed
    keeps its train pass rate (no alarm) and fails both held-out tasks at epochs 3-4. Held-out
    at epoch 4, per (task, seed): /2 passes for the first seed only, /3 for none; at epoch 0
    every one passes."""
    for i, judge in enumerate(judges):
        for q, seed in enumerate(seeds or (None,)):
            out = training_dir / judge if seed is None else training_dir / judge / f"seed-{seed}"
            _write_run(out, judge, i, first=q == 0, seed=seed)


def _write_run(out: Path, judge: str, i: int, first: bool, seed: int | None = None) -> None:
    """Held-out draws are seeded as the trainer seeds them: one training seed's differ from
    another's (`plan.heldout_row`), and are the same at every epoch."""
    from judgelab.advantage import group_advantages
    from judgelab.rollouts.generate import sample_seed
    from judgelab.training.alignment import epoch_alignment, group_alignment
    from judgelab.training.history import EpochRow, history_frame, samples_frame
    from judgelab.training.plan import heldout_row, train_row

    history = []
    for e in range(5):
        boost = 0.1 if e == 3 else 0.0
        rewards = [0.2 + 0.1 * e + 0.05 * i + boost, 0.4 + 0.1 * e + boost]
        passed = [0.0, 0.0] if e in (3, 4) and first else [0.0, 1.0]
        held = ([1.0, 0.0] if first else [0.0, 0.0]) if e in (3, 4) else [1.0, 1.0]
        records = [
            {
                "judge": judge, "epoch": e, "split": "train", "task_id": "HumanEval/0",
                "candidate_id": f"{judge}-{e}-{k}", "sample_index": k, "reward": r,
                "status": "scored", "passed": passed[k], "completion_tokens": 50,
                "finish_reason": "stop", "group": 0,
                "draw_seed": sample_seed(seed or 0, train_row(e, 0, 1, "HumanEval/0"), k),
            }
            for k, r in enumerate(rewards)
        ] + [
            {
                "judge": judge, "epoch": e, "split": "heldout", "task_id": f"HumanEval/{2 + t}",
                "candidate_id": f"{judge}-{e}-h{t}", "sample_index": 0, "reward": None,
                "status": None, "passed": p, "completion_tokens": 60, "finish_reason": "stop",
                "draw_seed": sample_seed(0, heldout_row(f"HumanEval/{2 + t}", seed), 0),
            }
            for t, p in enumerate(held)
        ]  # fmt: skip
        row = EpochRow(
            judge=judge, epoch=e, adapter=f"a{e}", groups=1, groups_skipped=0, samples=2,
            reward_mean=sum(rewards) / 2, reward_median=sum(rewards) / 2, reward_std=0.1,
            reward_iqr=0.1, unscored_rate=0.0, out_of_range_rate=0.0,
            train_pass_rate=sum(passed) / 2,
            heldout_pass_rate=sum(held) / 2, heldout_n=2, truth_unscored=0, forged=0,
            completion_tokens_mean=50.0,
            loss=None if e == 4 else 1.0 / (e + 1 + i), grad_norm=None if e == 4 else 0.5,
            clip_fraction=None if e == 4 else 0.0, ratio_mean=None if e == 4 else 1.0,
            dtype="float32", device="cpu", records=records,
            **epoch_alignment([group_alignment(group_advantages(rewards), passed)], 5),
        )  # fmt: skip
        history.append(asdict(row))
    write_parquet(out / "history.parquet", history_frame(history))
    write_parquet(out / "samples.parquet", samples_frame(history))


def write_probe_metrics(path: Path, judges: tuple[str, ...]) -> None:
    """`{"judges": {judge: {figure, figure_ci_low, figure_ci_high, ...}}}`."""
    body = {
        j: {
            "position": {
                "position_consistency": 0.5 + 0.1 * i,
                "position_consistency_ci_low": 0.4 + 0.1 * i,
                "position_consistency_ci_high": 0.6 + 0.1 * i,
            },
            "self_preference": {"family_gap": 0.02 * i},
            "attacks": {"grader_comment": {"success_rate": 0.1 * i, "uplift": 0.05 * i}},
            "verbosity_delta": -0.05 + 0.1 * i,  # not a figure the audit report shows
            "note": "text figures are ignored",
        }
        for i, j in enumerate(judges)
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"judges": body}))
