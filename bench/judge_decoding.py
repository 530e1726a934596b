"""Benchmark: what JSON-constrained decoding costs a judge on the embedded server.

Side by side, in one run, on the same prompt and seed: free-text decoding, decoding under
the RULER response schema as a llama.cpp grammar (what judgelab sends embedded judges), and
the same schema with judgelab's string bounds. Prints tokens/s and the ratio to free text.

    .venv/bin/python bench/judge_decoding.py [--models qwen-0.5b smollm2-135m] [--repeats 2]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import httpx

from judgelab.env import configure_offline_env

configure_offline_env()

from art.rewards.ruler import Response  # noqa: E402

from judgelab.config import load_settings  # noqa: E402
from judgelab.evaluators.transport.schema import bound_schema, inline_refs  # noqa: E402
from judgelab.models.server import serve  # noqa: E402

CODE = "def add(a, b):\n    # add two numbers\n    return a + b{}\n"
MESSAGES = [
    {"role": "system", "content": "Score each trajectory between 0 and 1 and explain briefly."},
    {
        "role": "user",
        "content": "Trajectories:\n\n"
        + "\n\n".join(
            f'<trajectory id="{i}">\n{CODE.format(" + 0" * i)}</trajectory>' for i in range(1, 5)
        ),
    },
]


def formats() -> dict[str, dict | None]:
    schema = inline_refs(Response.model_json_schema())
    bounded = bound_schema(copy.deepcopy(schema), string_max_chars=120, array_items=4)
    return {
        "free text": None,
        "grammar": {"type": "json_object", "schema": schema},
        "grammar+bounds": {"type": "json_object", "schema": bounded},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["qwen-0.5b", "smollm2-135m"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=200)
    args = ap.parse_args()
    settings = load_settings("params.yaml")
    with serve(settings, args.models) as endpoints:
        for name in args.models:
            ep = endpoints[name]
            rates: dict[str, float] = {}
            for label, rf in formats().items():
                body = {
                    "model": ep.model,
                    "messages": MESSAGES,
                    "temperature": 0.0,
                    "max_tokens": args.max_tokens,
                    "seed": 0,
                }
                if rf:
                    body["response_format"] = rf
                httpx.post(
                    f"{ep.base_url}/chat/completions", json={**body, "max_tokens": 1}, timeout=600
                )
                samples = []
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    reply = httpx.post(
                        f"{ep.base_url}/chat/completions", json=body, timeout=600
                    ).json()
                    elapsed = time.perf_counter() - start
                    samples.append(reply["usage"]["completion_tokens"] / elapsed)
                rates[label] = statistics.median(samples)
            base = rates["free text"]
            for label, rate in rates.items():
                print(f"{name:14s} {label:15s} {rate:7.1f} tok/s  {rate / base:5.2f}x free text")


if __name__ == "__main__":
    main()
