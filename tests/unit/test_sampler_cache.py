"""The training sampler's cache: a row drawn in one dtype or on one device is never reused for
another (bfloat16 and float32, CPU and CUDA draw different tokens). A stand-in policy: this is
about the cache key, judgelab's own logic, not about a model."""

from __future__ import annotations

from pathlib import Path

from judgelab.cache import JsonCache
from judgelab.training.policy import Sample
from judgelab.training.sampler import Request, Sampler


class CountingPolicy:
    zoo_name = "stand-in"

    def __init__(self, dtype: str, device: str) -> None:
        self.dtype, self.device, self.drawn = dtype, device, 0

    def prompt_ids(self, messages: list[dict]) -> list[int]:
        return [1, 2, 3]

    def sample(self, prompts: list, **kw: list) -> list[Sample]:
        self.drawn += len(prompts)
        return [Sample([7], [-0.5], f"{self.dtype}", "stop") for _ in prompts]


def test_dtype_and_device_key_the_sample_cache(tmp_path: Path) -> None:
    cache = JsonCache(tmp_path, "samples")
    request = [Request("a", [{"role": "user", "content": "x"}], (1, 2), 1.0, 8)]
    hashes = {"a": "h"}
    runs = [("float32", "cpu"), ("float32", "cpu"), ("bfloat16", "cpu"), ("float32", "cuda")]
    drawn = []
    for dtype, device in runs:
        policy = CountingPolicy(dtype, device)
        (rows,) = Sampler(policy, cache).round(request, hashes)  # type: ignore[arg-type]
        drawn.append(policy.drawn)
        assert {s.text for s in rows} == {dtype}  # never another dtype's rows
    assert drawn == [2, 0, 2, 2]  # the same dtype and device: from the cache
