"""Train every judge's policies from settings: backend choice, judge endpoints, held-out tasks,
and where each (judge, seed) writes (`training.layout`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judgelab.cache import JsonCache
from judgelab.config import EmbeddedModel, Settings
from judgelab.errors import ConfigError
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.evaluators.registry import build_evaluator
from judgelab.extras import require
from judgelab.io import write_parquet
from judgelab.models.server import serve
from judgelab.paths import cache_dir, project_root
from judgelab.scoring import Scorer, score_serially
from judgelab.tasks.registry import tasks_by_id
from judgelab.training.history import history_frame, samples_frame
from judgelab.training.layout import (
    GROUPS_FILE,
    HELDOUT_FILE,
    HISTORY_FILE,
    SAMPLES_FILE,
    planned_runs,
)
from judgelab.training.round import RewardRun
from judgelab.training.trainer import Trainer
from judgelab.verdicts import Task

log = logging.getLogger(__name__)


HUMANEVAL_SIZE = 164


def heldout_ids(settings: Settings) -> list[str]:
    """The ids of the held-out tasks (`select: fixed`) or of the pool they are chosen from
    (`mixed`): `train.heldout.ids`, or HumanEval[offset : offset + pool (mixed) or limit]."""
    h = settings.train.heldout
    if h.ids:
        return list(h.ids if h.select == "mixed" else h.ids[: h.limit])
    size = h.pool if h.select == "mixed" else h.limit
    return [f"HumanEval/{i}" for i in range(h.offset, min(h.offset + size, HUMANEVAL_SIZE))]


def heldout_tasks(settings: Settings, root: Path | None = None) -> list[Task]:
    """The held-out tasks or their pool (`heldout_ids`), each built by the task source that
    holds it, with that source's settings (`tasks_by_id`): a CodeI/O task is held out as a
    HumanEval one is. `root`: the project root your task files are relative to."""
    return tasks_by_id(
        settings.tasks, root or project_root(), heldout_ids(settings), "train.heldout.ids"
    )


def check_backend(backend: str) -> None:
    """The `art` backend runs ART's LocalBackend (vLLM + Unsloth): an NVIDIA GPU and the extra."""
    if backend != "art":
        return
    import torch

    if not torch.cuda.is_available():
        raise ConfigError(
            "train.backend: 'art' runs ART's LocalBackend, which needs an NVIDIA GPU with CUDA "
            "and the extra `pip install 'judgelab[art]'` (openpipe-art[backend]); this machine "
            "has no CUDA device. Use train.backend: torch (CPU or CUDA)."
        )
    try:
        import art.local  # noqa: F401
        import unsloth  # noqa: F401
        import vllm  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            f"train.backend: 'art' needs the extra `pip install 'judgelab[art]'` ({err})"
        ) from None
    raise ConfigError(
        "train.backend: 'art' is not wired into the epoch loop yet (see docs/TRAINING.md); "
        "use train.backend: torch, which also runs on CUDA"
    )


def engine_factory(settings: Settings) -> Callable[[Any], Any] | None:
    """What draws the policy's samples (`train.sampler`): llama.cpp with the current adapter
    (`training.llama_policy`), given the policy; None: the torch policy's own decode."""
    if settings.train.sampler != "llama.cpp":
        return None
    from judgelab.training.llama_policy import LlamaPolicySampler

    threads = settings.server.n_threads
    return lambda policy: LlamaPolicySampler(policy, threads)


def train_rewards(
    settings: Settings,
    tasks: list[Task],
    out_root: Path,
    on_progress: Callable[[str, int], None] | None = None,
    scorer: Scorer = score_serially,
) -> dict[str, Path]:
    """Train (or resume) one policy per judge in `train.rewards` and seed in `train.seeds`
    (`train.seed` alone when empty), in lockstep; returns each run's history file by
    `RewardRun.key` (`out_root/<judge>/history.parquet`, or `out_root/<judge>/seed-<s>/...`).
    `scorer` makes each epoch's judge and test calls (the training flow's runs them
    concurrently, in lanes)."""
    from judgelab.training.policy import Policy, converted_dir

    train = settings.train
    require("train", "the training stage")
    check_backend(train.backend)
    specs = {judge: settings.evaluator(judge) for judge in train.rewards}
    policy_model = settings.model(train.policy)
    assert isinstance(policy_model, EmbeddedModel)  # checked by Settings
    executor = ExecutionEvaluator(settings.test_runner())
    converted_dir(policy_model.zoo)  # before any model server: their peaks never add up
    with serve(settings, settings.models_called("training")) as endpoints:
        judge_cache = JsonCache(cache_dir(), "judge", settings.cache.seed_dirs())
        judges = {
            judge: build_evaluator(spec, endpoints, judge_cache) for judge, spec in specs.items()
        }
        runs = [
            RewardRun(d.judge, judges[d.judge], d.path, d.seed)
            for d in planned_runs(out_root, train.rewards, train.seeds)
        ]
        trainer = Trainer(
            runs=runs,
            settings=train,
            rollout=settings.rollouts,
            tasks=tasks,
            heldout=heldout_tasks(settings),
            cache=JsonCache(cache_dir(), "training-samples", settings.cache.seed_dirs()),
            executor=executor,
            selection_file=out_root / HELDOUT_FILE,
            policy_factory=lambda adapters: Policy(
                policy_model.zoo, train.lora, train.device, dtype=train.dtype, adapters=adapters,
                gradient_checkpointing=train.gradient_checkpointing,
            ),
            scorer=scorer,
            min_ci_groups=settings.analysis.min_ci_groups,
            engine_factory=engine_factory(settings),
            groups_file=out_root / GROUPS_FILE,
        )
        histories = trainer.run(on_progress)
    paths = {}
    for run in runs:
        history = histories[run.key]
        write_parquet(run.out_dir / SAMPLES_FILE, samples_frame(history))
        paths[run.key] = run.out_dir / HISTORY_FILE
        write_parquet(
            paths[run.key], history_frame(history, train.hacking_margin, train.alarm_alpha)
        )
    return paths
