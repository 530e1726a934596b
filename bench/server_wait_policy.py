"""Benchmark: the embedded judge server with and without OMP_WAIT_POLICY=PASSIVE.

A judge call on the embedded server is a prompt evaluation and then one token at a time, and
each token runs a few hundred small parallel regions on llama.cpp's two threads. Under PASSIVE
the second thread sleeps after every region and is woken for the next; libgomp's default
spins briefly first. libgomp reads the variable when the server starts, so the two settings
run in alternating server processes (`judgelab.models.server.serve`, as every stage starts
it), with the same models, prompt (the RULER-style request of bench/judge_decoding.py, its
prompt evaluated afresh each time), bounded schema, seed and greedy decoding. Prints seconds
per reply for each setting, the ratio, and whether both wrote the same reply.

    .venv/bin/python bench/server_wait_policy.py [--models qwen-0.5b smollm2-135m] [--pairs 2]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import httpx

from judgelab.env import configure_offline_env

configure_offline_env()

from judge_decoding import MESSAGES, formats  # noqa: E402  (bench/ is on sys.path)

from judgelab.config import load_settings  # noqa: E402
from judgelab.models.server import serve  # noqa: E402

SETTINGS = {"PASSIVE": "PASSIVE", "default": None}


def reply(base_url: str, model: str, nonce: str, max_tokens: int) -> tuple[float, int, str]:
    """Seconds, completion tokens and text of one greedy RULER-style reply. The nonce leads
    the prompt: the model-loading call uses another, so the timed prompt shares no prefix
    with it and is evaluated afresh."""
    messages = [dict(m) for m in MESSAGES]
    messages[0]["content"] = f"Request {nonce}. {messages[0]['content']}"
    body = {
        "model": model,
        "messages": messages,
        "response_format": formats()["grammar+bounds"],
        "temperature": 0.0,
        "max_tokens": max_tokens,
        "seed": 0,
    }
    start = time.perf_counter()
    out = httpx.post(f"{base_url}/chat/completions", json=body, timeout=900).json()
    seconds = time.perf_counter() - start
    return seconds, out["usage"]["completion_tokens"], out["choices"][0]["message"]["content"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--models", nargs="+", default=["qwen-1.5b", "qwen-0.5b", "smollm2-135m", "gemma-270m"]
    )
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=400)
    args = ap.parse_args()
    settings = load_settings("params.yaml")
    seconds: dict[tuple[str, str], list[float]] = {}
    texts: dict[str, set[str]] = {m: set() for m in args.models}
    tokens: dict[str, int] = {}
    for pair in range(args.pairs):
        for label, value in SETTINGS.items():
            if value is None:
                os.environ.pop("OMP_WAIT_POLICY", None)
            else:
                os.environ["OMP_WAIT_POLICY"] = value
            with serve(settings, args.models) as endpoints:
                for name in args.models:
                    ep = endpoints[name]
                    reply(ep.base_url, ep.model, "load", 1)
                    s, n, text = reply(ep.base_url, ep.model, "0", args.max_tokens)
                    seconds.setdefault((name, label), []).append(s)
                    texts[name].add(text)
                    tokens[name] = n
                    print(f"pair {pair} {label:8s} {name:14s} {s:6.2f} s, {n} tokens", flush=True)
    os.environ.pop("OMP_WAIT_POLICY", None)
    print()
    print("| judge model | reply | PASSIVE | default | default / PASSIVE | same reply |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.models:
        p = statistics.median(seconds[(name, "PASSIVE")])
        d = statistics.median(seconds[(name, "default")])
        same = "yes" if len(texts[name]) == 1 else "no"
        print(f"| {name} | {tokens[name]} tokens | {p:.1f} s | {d:.1f} s | {d / p:.2f}× | {same} |")


if __name__ == "__main__":
    main()
