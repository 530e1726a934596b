"""Train one judge's policy from settings: backend choice, judge endpoint, held-out tasks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from judgelab.cache import JsonCache
from judgelab.config import EmbeddedModel, HumanEvalSettings, Settings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import Task
from judgelab.evaluators.execution import ExecutionJudge
from judgelab.io import write_parquet
from judgelab.models.server import serve
from judgelab.paths import cache_dir
from judgelab.scoring import build_evaluator
from judgelab.tasks.humaneval import load_humaneval
from judgelab.training.loop import Trainer, default_executor_spec, history_frame, samples_frame

log = logging.getLogger(__name__)

HISTORY_FILE = "history.parquet"
SAMPLES_FILE = "samples.parquet"


def heldout_tasks(settings: Settings) -> list[Task]:
    h = settings.train.heldout
    return load_humaneval(HumanEvalSettings(offset=h.offset, limit=h.limit))


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


def train_judge(
    settings: Settings,
    judge: str,
    tasks: list[Task],
    out_dir: Path,
    on_epoch: Callable[[dict], None] | None = None,
) -> Path:
    """Train (or resume) the policy for `judge`; returns the history file."""
    from judgelab.training.policy import Policy

    train = settings.train
    check_backend(train.backend)
    spec = settings.evaluator(judge)
    policy_model = settings.model(train.policy)
    assert isinstance(policy_model, EmbeddedModel)  # checked by Settings
    judge_models = [spec.judge] if hasattr(spec, "judge") else []
    executor = ExecutionJudge(default_executor_spec(settings.scores.evaluators))
    with serve(settings, judge_models) as endpoints:
        evaluator = build_evaluator(spec, endpoints, JsonCache(cache_dir(), "judge"))
        trainer = Trainer(
            judge_name=judge,
            judge=evaluator,
            spec=spec,
            settings=train,
            rollout=settings.rollouts,
            tasks=tasks,
            heldout=heldout_tasks(settings),
            out_dir=out_dir,
            cache=JsonCache(cache_dir(), "training-samples"),
            executor=executor,
            policy_factory=lambda adapter: Policy(
                policy_model.zoo, train.lora, train.device, adapter, train.dtype
            ),
        )
        history = trainer.run(on_epoch)
    write_parquet(out_dir / SAMPLES_FILE, samples_frame(history))
    path = out_dir / HISTORY_FILE
    write_parquet(path, history_frame(history))
    return path
