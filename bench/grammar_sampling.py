"""Benchmark: grammar applied to the whole vocabulary at every step vs checked after sampling.

llama-cpp-python's sampler applies a JSON grammar to every vocabulary token before sampling;
judgelab's embedded server (`judgelab.models.llama_server`) samples first and checks only
the sampled token, as llama.cpp's own server does. Side by side, in one run, in one process,
on the same model, prompt (a RULER-style request for 4 trajectories), schema (the RULER
response with judgelab's bounds) and seed, greedy: tokens/s of each, their ratio, and
whether both wrote the same reply (they must, at temperature 0). Each reply evaluates its
prompt afresh, as a judge call with a new group does, so the time includes the prompt.

    .venv/bin/python bench/grammar_sampling.py [--models qwen-0.5b smollm2-135m gemma-270m]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import statistics
import time

from judgelab.env import configure_offline_env

configure_offline_env()

# The prompt and bounded schema of bench/judge_decoding.py, so the two read together.
from judge_decoding import MESSAGES, formats  # noqa: E402  (bench/ is on sys.path)
from llama_cpp import Llama  # noqa: E402

from judgelab.config import load_settings  # noqa: E402
from judgelab.models import llama_server  # noqa: E402
from judgelab.models.zoo import ensure_model  # noqa: E402

STOCK = Llama._init_sampler


def run(llm: Llama, schema: dict, repeats: int, max_tokens: int) -> tuple[float, int, str]:
    """Median seconds per reply, the reply's tokens and its text (greedy: one text)."""
    seconds, texts, tokens = [], set(), 0
    for _ in range(repeats):
        llm.reset()  # evaluate the prompt afresh: a cached prefix changes the logits slightly
        start = time.perf_counter()
        reply = llm.create_chat_completion(
            messages=MESSAGES, response_format=schema, temperature=0.0,
            max_tokens=max_tokens, seed=0,
        )  # fmt: skip
        seconds.append(time.perf_counter() - start)
        tokens = reply["usage"]["completion_tokens"]
        texts.add(reply["choices"][0]["message"]["content"])
    assert len(texts) == 1, "greedy decoding gave two different replies"
    return statistics.median(seconds), tokens, texts.pop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["qwen-0.5b", "smollm2-135m", "gemma-270m"])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=200)
    args = ap.parse_args()
    settings = load_settings("params.yaml")
    schema = formats()["grammar+bounds"]
    for name in args.models:
        spec = settings.models[name]
        llm = Llama(
            str(ensure_model(spec.zoo)), n_ctx=2048, verbose=False,
            n_threads=settings.server.n_threads, n_threads_batch=settings.server.n_threads,
        )  # fmt: skip
        Llama._init_sampler = STOCK  # type: ignore[method-assign]
        stock, tokens, stock_text = run(llm, schema, args.repeats, args.max_tokens)
        llama_server.install()
        checked, _, checked_text = run(llm, schema, args.repeats, args.max_tokens)
        Llama._init_sampler = STOCK  # type: ignore[method-assign]
        same = "same reply" if stock_text == checked_text else "DIFFERENT replies"
        print(
            f"{name:14s} {tokens:4d} tokens   whole vocabulary {stock:6.1f} s   "
            f"checked {checked:6.1f} s   {checked / stock:4.2f}x the time   {same}"
        )
        del llm


if __name__ == "__main__":
    main()
