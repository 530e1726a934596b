"""Inputs for the optional report sections, in the layout their stages write."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from judgelab.io import write_parquet


def write_training_histories(training_dir: Path, judges: tuple[str, ...]) -> None:
    """`<judge>/history.parquet`: 5 steps of loss and reward per judge."""
    for i, judge in enumerate(judges):
        steps = list(range(5))
        write_parquet(
            training_dir / judge / "history.parquet",
            pl.DataFrame(
                {
                    "step": steps,
                    "loss": [1.0 / (s + 1 + i) for s in steps],
                    "reward_mean": [0.2 + 0.1 * s + 0.05 * i for s in steps],
                }
            ),
        )


def write_probe_metrics(path: Path, judges: tuple[str, ...]) -> None:
    """`{"judges": {judge: {figure, figure_ci_low, figure_ci_high, ...}}}`."""
    body = {
        j: {
            "position": {
                "consistency": 0.5 + 0.1 * i,
                "consistency_ci_low": 0.4 + 0.1 * i,
                "consistency_ci_high": 0.6 + 0.1 * i,
            },
            "verbosity_delta": -0.05 + 0.1 * i,
            "self_preference_gap": 0.02 * i,
            "note": "text figures are ignored",
        }
        for i, j in enumerate(judges)
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"judges": body}))
