"""Where the training stage writes each policy's output, and how readers find it.

One folder per trained policy (a "run": one judge, one training seed), holding
`history.parquet`, `samples.parquet` and `checkpoints/step-NNN/`:

- `train.seeds` empty (one seed, `train.seed`): `<root>/<judge>/`;
- `train.seeds` set: `<root>/<judge>/seed-<s>/` for each seed s.

The held-out choice (`heldout.json`) and the training tasks' (`groups.json`) sit at
`<root>`, shared by every run. The tables of a
run have the same columns either way (the seed is in the folder's name, not in a column).
The single-seed layout is not a shim: it is the default run's, whose adapter starts from
PEFT's own initialisation, not a seed's (`Policy.init_adapter`). Readers (analysis, tracking,
the checkpoint CLI) list runs with `run_dirs`; nothing here imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from judgelab.errors import ConfigError

HISTORY_FILE = "history.parquet"
SAMPLES_FILE = "samples.parquet"
HELDOUT_FILE = "heldout.json"  # the held-out choice of select: mixed
GROUPS_FILE = "groups.json"  # the training tasks' choice of train.select: mixed
CHECKPOINTS = "checkpoints"
_SEED_DIR = re.compile(r"^seed-(-?\d+)$")


def seed_dir_name(seed: int) -> str:
    return f"seed-{seed}"


@dataclass(frozen=True)
class RunDir:
    """One trained policy's folder: its judge, its training seed (None: the single-seed
    layout, trained with `train.seed`) and its path."""

    judge: str
    seed: int | None
    path: Path

    @property
    def label(self) -> str:
        """`judge` or `judge/seed-<s>`: unique among the runs of one training stage."""
        return self.judge if self.seed is None else f"{self.judge}/{seed_dir_name(self.seed)}"


def planned_runs(root: Path, judges: Sequence[str], seeds: Sequence[int]) -> list[RunDir]:
    """The runs a training stage with `train.rewards` and `train.seeds` writes, judge-major."""
    if not seeds:
        return [RunDir(judge, None, root / judge) for judge in judges]
    return [
        RunDir(judge, seed, root / judge / seed_dir_name(seed))
        for judge in judges
        for seed in seeds
    ]


def _has_output(path: Path) -> bool:
    return (path / HISTORY_FILE).exists() or (path / CHECKPOINTS).is_dir()


def run_dirs(root: Path) -> list[RunDir]:
    """Every run folder under `root` with output (a history or checkpoints), by judge, then
    seed. A judge folder is one run (single-seed layout) or holds `seed-<s>` runs; a folder
    holding both (left over from a run with other `train.seeds`) is an error that says which
    to delete, never a silent choice."""
    out: list[RunDir] = []
    if not root.is_dir():
        return out
    for judge_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        seeded = []
        for d in judge_dir.iterdir():
            m = _SEED_DIR.match(d.name)
            if m and d.is_dir() and _has_output(d):
                seeded.append(RunDir(judge_dir.name, int(m.group(1)), d))
        if seeded and _has_output(judge_dir):
            raise ConfigError(
                f"{judge_dir} holds both a single-seed run and seed-<s> runs (output of runs "
                "with different train.seeds); delete the one that is stale"
            )
        if seeded:
            out += sorted(seeded, key=lambda r: r.seed)
        elif _has_output(judge_dir):
            out.append(RunDir(judge_dir.name, None, judge_dir))
    return out
