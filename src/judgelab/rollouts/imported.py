"""Your own candidates (`rollouts.candidates`) in place of sampling the policy, or beside its
samples (`rollouts.extra_candidates`): docs/TASKS.md.

One candidate per line (JSONL) or row (parquet): `task_id` (a task of the tasks table) and
`completion` (the answer as the policy wrote it), and optionally `policy` (a name; default
``imported``) and `messages` (the conversation the policy saw; default: the system prompt and
the task's request, as judgelab would have sent them). A task's candidates form its group, in
file order; `rollouts.k` does not apply. Every error names the file, line or row and field.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judgelab.config import RolloutSettings
from judgelab.errors import ConfigError
from judgelab.io import validated_record, validated_records
from judgelab.rollouts.generate import policy_messages
from judgelab.verdicts import Task

IMPORTED = "imported"  # the policy and model_sha256 of a candidate judgelab did not sample


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class CandidateRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1)
    completion: str
    policy: str = Field(IMPORTED, min_length=1)
    messages: list[Message] | None = Field(None, min_length=1)


def candidate_id(task_id: str, policy: str, sample_index: int, completion: str) -> str:
    """Content-addressed: the same file gives the same ids, so judge caches still hit."""
    text = json.dumps([task_id, policy, sample_index, completion], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def import_candidates(
    path: Path, where: str, tasks: list[Task], settings: RolloutSettings
) -> list[dict]:
    """Rollout rows (the rollouts table's columns) for every candidate in the file."""
    records = validated_records(path, where, CandidateRow, "a candidate", "messages")
    named = ((f"{where} ({path}) {place}", row) for place, row in records)
    rows = candidate_rows(named, tasks, settings)
    if not rows:
        raise ConfigError(f"{where} ({path}): the file holds no candidates")
    return rows


def records_candidates(
    records: Iterable[Any], where: str, tasks: list[Task], settings: RolloutSettings
) -> list[dict]:
    """Rollout rows for candidates given in memory (the Python API): each record a mapping
    with a candidates file's fields; errors name `where`, the index and the field."""
    validated = (
        (f"{where}[{i}]", validated_record(record, CandidateRow, f"{where}[{i}]", "a candidate"))
        for i, record in enumerate(records)
    )
    rows = candidate_rows(validated, tasks, settings)
    if not rows:
        raise ConfigError(f"{where}: no candidates given")
    return rows


def candidate_rows(
    records: Iterable[tuple[str, CandidateRow]], tasks: list[Task], settings: RolloutSettings
) -> list[dict]:
    """Rollout rows for validated candidates, each named by its place in errors; a task's
    candidates form its group in the order given."""
    by_id = {t.task_id: t for t in tasks}
    counts: dict[str, int] = {}
    rows: list[dict] = []
    for place, row in records:
        task = by_id.get(row.task_id)
        if task is None:
            known = ", ".join(sorted(by_id)[:5]) + (", ..." if len(by_id) > 5 else "")
            raise ConfigError(
                f"{place}: field 'task_id': {row.task_id!r} is not in the tasks table ({known})"
            )
        index = counts.get(row.task_id, 0)
        counts[row.task_id] = index + 1
        messages = (
            [m.model_dump() for m in row.messages]
            if row.messages is not None
            else policy_messages(settings, task)
        )
        rows.append(
            {
                "task_id": row.task_id,
                "sample_index": index,
                "candidate_id": candidate_id(row.task_id, row.policy, index, row.completion),
                "policy": row.policy,
                "model_sha256": IMPORTED,
                "seed": -1,  # not sampled by judgelab
                "messages_json": json.dumps(messages, ensure_ascii=False),
                "completion": row.completion,
                "finish_reason": None,
                "completion_tokens": 0,
                "latency_s": 0.0,
                "cache_key": "",
            }
        )
    return rows


def join_candidates(
    path: Path, where: str, tasks: list[Task], settings: RolloutSettings, first_index: int
) -> list[dict]:
    """The file's candidates as rollout rows that join sampled groups
    (`rollouts.extra_candidates`): a task's take the places from `first_index` on, after its
    writers' samples."""
    rows = import_candidates(path, where, tasks, settings)
    return [{**r, "sample_index": first_index + r["sample_index"]} for r in rows]
