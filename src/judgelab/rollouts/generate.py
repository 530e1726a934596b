"""k candidates per task from the policy, each with its own seed, through the cache.

The seed of sample i of task t is derived from (rollouts.seed, t, i), so adding tasks or
raising k never changes the samples already drawn. `candidate_id` is derived from the cache
key, so the same sample has the same id in every run and every table.

With several writers (`rollouts.policies`) a task's group is every writer's k samples, writer
by writer: the table's `sample_index` is the place in that group, while the seed and the cache
key use the place within the writer's own k, so one writer's samples are the ones it draws
alone (the same cache entries, the same ids).
"""

from __future__ import annotations

import hashlib
import json

import polars as pl

from judgelab.cache import JsonCache
from judgelab.config import RolloutSettings
from judgelab.errors import ConfigError
from judgelab.models.completions import cached_chat
from judgelab.models.endpoint import Endpoint
from judgelab.rollouts.origins import origin
from judgelab.schemas import RolloutsSchema, columns, validate
from judgelab.verdicts import Candidate, Task


def sample_seed(base: int, task_id: str, sample_index: int) -> int:
    h = hashlib.sha256(f"{base}|{task_id}|{sample_index}".encode()).digest()
    return int.from_bytes(h[:4], "big") & 0x7FFFFFFF


def policy_messages(settings: RolloutSettings, task: Task) -> list[dict]:
    return [
        {"role": "system", "content": settings.system_prompt},
        {"role": "user", "content": task.request},
    ]


def generate_group(
    settings: RolloutSettings,
    task: Task,
    endpoint: Endpoint,
    cache: JsonCache,
    first_index: int = 0,
) -> list[dict]:
    """The k rollout rows of one task from one writer (cached samples are not recomputed);
    `first_index` is the place of the writer's first sample in the task's group."""
    messages = policy_messages(settings, task)
    rows = []
    for i in range(settings.k):
        seed = sample_seed(settings.seed, task.task_id, i)
        out = cached_chat(
            cache,
            endpoint,
            messages,
            temperature=settings.temperature,
            top_p=settings.top_p,
            max_tokens=settings.max_tokens,
            seed=seed,
            sample_index=i,
        )
        rows.append(
            {
                "task_id": task.task_id,
                "sample_index": first_index + i,
                "candidate_id": out["cache_key"][:16],
                "policy": endpoint.name,
                "model_sha256": endpoint.fingerprint,
                "seed": seed,
                "messages_json": json.dumps(messages, ensure_ascii=False),
                "completion": out["text"],
                "finish_reason": out["finish_reason"],
                "completion_tokens": int(out["completion_tokens"]),
                "latency_s": float(out["latency_s"]),
                "cache_key": out["cache_key"],
            }
        )
    return rows


def distinct_writers(endpoints: dict[str, Endpoint]) -> None:
    """Two writers that are one model would draw the same samples under the same cache keys
    (the same candidate ids): refused before anything is sampled."""
    seen: dict[tuple[str, bool], str] = {}
    for name, endpoint in endpoints.items():
        key = (endpoint.fingerprint, endpoint.system_role)  # the endpoint's part of a key
        if key in seen:
            raise ConfigError(
                f"rollouts.policies: {seen[key]!r} and {name!r} are the same model "
                f"({endpoint.fingerprint}); their samples would be the same"
            )
        seen[key] = name


def rollouts_frame(rows: list[dict]) -> pl.DataFrame:
    frame = pl.DataFrame(rows, schema=columns(RolloutsSchema)).sort(["task_id", "sample_index"])
    return validate(frame, RolloutsSchema, "rollouts table")


def candidates_by_task(frame: pl.DataFrame) -> dict[str, list[Candidate]]:
    """Each task's candidates, in sample order."""
    return {task_id: group for (task_id, _), group in candidates_by_group(frame, False).items()}


def candidates_by_group(frame: pl.DataFrame, apart: bool) -> dict[tuple[str, str], list[Candidate]]:
    """The groups a judge scores, keyed (task_id, population), candidates in sample order.
    `apart`: a task's natural candidates and its known-truth contrast group
    (`rollouts.origins`, by the writer in `policy`) are two groups; else one, population
    "all" (`scores.populations`)."""
    groups: dict[tuple[str, str], list[Candidate]] = {}
    for row in frame.sort(["task_id", "sample_index"]).iter_rows(named=True):
        population = origin(row["policy"]) if apart else "all"
        groups.setdefault((row["task_id"], population), []).append(
            Candidate(
                task_id=row["task_id"],
                candidate_id=row["candidate_id"],
                sample_index=row["sample_index"],
                completion=row["completion"],
                messages=json.loads(row["messages_json"]),
            )
        )
    return groups
