"""Sampling the policies: one batched decode per round over every run's requests, each row
cached by the adapter's content hash, the prompt, the sampling settings and its seed; and the
candidates made of a request's samples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

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


class Engine(Protocol):
    """What draws a round's rows instead of the torch policy's own decode
    (`training.llama_policy.LlamaPolicySampler`): `Policy.sample`'s contract, and `key`, the
    part of a row's cache key that names the engine (its rows' log-probabilities may be
    empty: the trainer computes them with torch before a step)."""

    key: Mapping[str, Any]

    def sample(
        self,
        prompts: Sequence[list[int]],
        *,
        temperatures: Sequence[float],
        max_new_tokens: Sequence[int],
        seeds: Sequence[int],
        adapters: Sequence[str],
    ) -> list[Sample]: ...


class Sampler:
    """One batched decode per round over every judge's requests, cached per row by the
    adapter's content hash, the prompt, the sampling settings and the row's seed. A row that
    is already cached is not drawn again: the base policy's round is drawn once for all
    judges, and a crashed run's last round is reused when it resumes. `engine` draws the rows
    in place of the torch policy (llama.cpp: `train.sampler`); its rows are cached under its
    own key, without the torch policy's dtype and device, which do not change them."""

    VERSION = 3  # of the sampling procedure: rows drawn by another version are not reused
    # (3: log-probabilities at the sampling temperature)

    def __init__(self, policy: Policy, cache: JsonCache, engine: Engine | None = None) -> None:
        self.policy = policy
        self.cache = cache
        self.engine = engine

    def _where(self) -> dict[str, Any]:
        """What drew the rows, in their cache key."""
        if self.engine is not None:
            return {"engine": dict(self.engine.key)}
        # bfloat16 and float32 (and CPU and CUDA) draw different tokens
        return {"sampler": self.VERSION, "dtype": self.policy.dtype,
                "device": self.policy.device}  # fmt: skip

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
                    **self._where(),
                    "adapter": hashes[r.adapter],
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
            drawn = (self.engine or self.policy).sample(
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
