"""Sampling the policies: one batched decode per round over every run's requests, each row
cached by the adapter's content hash, the prompt, the sampling settings and its seed; and the
candidates made of a request's samples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from judgelab.cache import JsonCache, digest
from judgelab.training.policy import Policy, Sample
from judgelab.verdicts import Candidate, Task


@dataclass(frozen=True)
class Request:
    """`len(seeds)` completions of one prompt from one adapter (a judge's policy)."""

    adapter: str
    messages: list[dict]
    seeds: tuple[int, ...]
    temperature: float
    max_tokens: int


class Sampler:
    """One batched decode per round over every judge's requests, cached per row by the
    adapter's content hash, the prompt, the sampling settings and the row's seed. A row that
    is already cached is not drawn again: the base policy's round is drawn once for all
    judges, and a crashed run's last round is reused when it resumes."""

    VERSION = 3  # of the sampling procedure: rows drawn by another version are not reused
    # (3: log-probabilities at the sampling temperature)

    def __init__(self, policy: Policy, cache: JsonCache) -> None:
        self.policy = policy
        self.cache = cache

    def round(self, requests: Sequence[Request], hashes: Mapping[str, str]) -> list[list[Sample]]:
        """Each request's samples, in order; `hashes` maps adapter names to content hashes."""
        rows: list[tuple[int, str]] = []  # (request index, row identity)
        found: dict[str, Sample] = {}
        todo: dict[str, tuple[dict, str]] = {}  # identity -> (cache key, adapter name)
        for i, r in enumerate(requests):
            prompt = self.policy.prompt_ids(r.messages)
            for seed in r.seeds:
                key = {
                    "policy": self.policy.zoo_name,
                    "sampler": self.VERSION,
                    "adapter": hashes[r.adapter],
                    # bfloat16 and float32 (and CPU and CUDA) draw different tokens
                    "dtype": self.policy.dtype,
                    "device": self.policy.device,
                    "prompt": prompt,
                    "temperature": r.temperature,
                    "max_tokens": r.max_tokens,
                    "seed": seed,
                }
                h = digest(key)
                rows.append((i, h))
                if h in found or h in todo:
                    continue
                hit = self.cache.get(key)
                if hit is not None:
                    found[h] = Sample(**hit)
                else:
                    todo[h] = (key, r.adapter)
        if todo:
            pending = list(todo.values())
            drawn = self.policy.sample(
                [k["prompt"] for k, _ in pending],
                temperatures=[k["temperature"] for k, _ in pending],
                max_new_tokens=[k["max_tokens"] for k, _ in pending],
                seeds=[k["seed"] for k, _ in pending],
                adapters=[name for _, name in pending],
            )
            for h, (key, _), sample in zip(todo, pending, drawn, strict=True):
                self.cache.put(key, asdict(sample))
                found[h] = sample
        groups: list[list[Sample]] = [[] for _ in requests]
        for i, h in rows:
            groups[i].append(found[h])
        return groups


def candidates(task: Task, messages: list[dict], samples: Sequence[Sample], tag: str) -> list:
    return [
        Candidate(
            task_id=task.task_id,
            candidate_id=digest({"tag": tag, "i": i, "ids": s.token_ids})[:16],
            sample_index=i,
            completion=s.text,
            messages=messages,
        )
        for i, s in enumerate(samples)
    ]
