"""Benchmark: llama.cpp continuous batching (several sequences in one decode) vs one at a time.

llama.cpp's own server decodes its parallel slots together: one `llama_decode` per step
carries the next token of every running sequence, so the weights are read once per step for
all of them. judgelab's embedded server (llama-cpp-python's `Llama`) decodes one sequence at
a time. This measures, on this machine's cores, whether the batched decode would raise the
throughput of rollouts or judge calls, through llama-cpp-python's low-level API
(`llama_batch_init`, `llama_decode` with one seq_id per sequence, one KV stream per
sequence, greedy sampling of each sequence's own logits row, `llama_memory_seq_cp/rm`) of
judgelab's own llama-cpp-python build:

- `high-level`: `Llama.create_chat_completion`, one reply after another, greedy: what the
  product's server does today (its prefix cache reuses a prompt shared with the last call);
- `sequential`: the low-level loop below, one sequence at a time (the fair baseline: the same
  code, context and sampling as `batched`);
- `batched`: the same loop with every sequence in one `llama_decode` per step; a sequence
  that ends leaves the batch and the others go on (continuous batching).

First the median time of one decode step with 1, 2, 4 and 8 sequences in it (`--widths`),
then three workloads on the default policy (Qwen2.5-Coder-0.5B, Q4_K_M):
- `rollouts`: 4 HumanEval prompts with the experiment's system prompt, each prefilled, and
  `--rollout-tokens` new tokens each;
- `group`: one of those prompts, prefilled once and shared by 4 sequences (copied in the KV
  cache), as a rollout group of k = 4 is (greedy, so the 4 replies are the same text: the
  decode work is what counts here);
- `judge`: 4 RULER-sized prompts (a task and 4 candidate solutions each), each prefilled,
  and a short reply (`--judge-tokens`), as 4 judge calls at once would be.

Paths alternate within each round, their order reversed every other round. The whole run
holds the machine-wide model lock (`judgelab.models.server.LOCK_PATH`), so no other judgelab
llama.cpp process shares the cores. Other work on the machine (test runs) is not locked out:
each measurement first waits (up to `--wait-quiet` s) for 3 quiet seconds, the CPU share
other processes took during it is printed, and a round in which they took more than
`--max-other` (or twice that over any 3 s, checked between tokens) is abandoned and run
again, within `--budget` minutes; on a quiet machine the default run takes 8-9 minutes.
Prints tokens/s and their ratio to `sequential`, the median time of a decode step by batch
width, and whether the greedy replies are token-identical (if not, where
the first divergence is).

    .venv/bin/python bench/embedded_batching.py [--rounds 2] [--rollout-tokens 128]

Results are recorded in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from judgelab.env import configure_offline_env

configure_offline_env()

import llama_cpp as lc  # noqa: E402
import numpy as np  # noqa: E402
from llama_cpp import Llama  # noqa: E402
from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: E402

from judgelab.config import HumanEvalSettings, RolloutSettings, load_settings  # noqa: E402
from judgelab.models.server import LOCK_PATH  # noqa: E402
from judgelab.models.zoo import ensure_model  # noqa: E402
from judgelab.rollouts.generate import policy_messages  # noqa: E402
from judgelab.tasks.humaneval import load_humaneval  # noqa: E402


@contextlib.contextmanager
def model_lock() -> Iterator[None]:
    """The lock every judgelab llama.cpp process holds: two on two cores run ~300x slower."""
    LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK_PATH, "w") as handle:
        start = time.perf_counter()
        fcntl.flock(handle, fcntl.LOCK_EX)
        waited = time.perf_counter() - start
        if waited > 1:
            print(f"waited {waited:.0f} s for {LOCK_PATH}", flush=True)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class CpuMeter:
    """CPU time the rest of the machine took (busy jiffies minus this process's) and steal,
    as shares of all cores since the meter started."""

    def __init__(self) -> None:
        self.start = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float, float]:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        hz = os.sysconf("SC_CLK_TCK")
        busy = (v[0] + v[1] + v[2] + v[5] + v[6]) / hz  # user nice system irq softirq
        own = os.times()
        return time.monotonic(), busy, v[7] / hz, own.user + own.system

    def shares(self) -> tuple[float, float, float]:
        """(other processes, steal, seconds) since the start."""
        t0, busy0, steal0, own0 = self.start
        t1, busy1, steal1, own1 = self._read()
        cores, wall = os.cpu_count() or 1, max(t1 - t0, 1e-9)
        other = max(0.0, (busy1 - busy0) - (own1 - own0)) / (wall * cores)
        return other, (steal1 - steal0) / (wall * cores), wall

    def report(self) -> str:
        other, steal, wall = self.shares()
        return f"other processes {other:.0%} of the cores, steal {steal:.0%}, over {wall:.0f} s"


def wait_quiet(limit_s: float, below: float = 0.1, quiet_s: int = 3) -> float:
    """Wait (at most limit_s) for `quiet_s` seconds in a row in which other processes used
    < `below` of the cores: other people's test runs on this machine come in bursts, and a
    llama.cpp decode on both cores slows down many times over beside one. Returns the wait."""
    start, quiet = time.monotonic(), 0
    while quiet < quiet_s and time.monotonic() - start < limit_s:
        meter = CpuMeter()
        time.sleep(1.0)
        quiet = quiet + 1 if meter.shares()[0] < below else 0
    return time.monotonic() - start


class Busy(Exception):
    """Other processes took the cores during a measurement: it is abandoned."""


class Guard:
    """Checked between tokens: raises Busy once other processes have used more than `limit`
    of the cores over the last `window_s` seconds, so a spoiled measurement stops early."""

    def __init__(self, limit: float, window_s: float = 3.0) -> None:
        self.limit, self.window_s = limit, window_s
        self.meter = CpuMeter()

    def check(self) -> None:
        other, _, seconds = self.meter.shares()
        if seconds >= self.window_s:
            if other > self.limit:
                raise Busy(f"others used {other:.0%} of the cores over {seconds:.0f} s")
            self.meter = CpuMeter()


@dataclass
class Run:
    """One path's replies to a workload, and where its time went."""

    tokens: list[list[int]] = field(default_factory=list)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    steps: dict[int, list[float]] = field(default_factory=dict)  # batch width -> step seconds
    texts: list[str] = field(default_factory=list)  # the high-level path's replies
    counted: int = 0  # the high-level path's completion tokens (it returns text, not ids)
    other: float = 0.0  # share of the cores other processes used while it ran

    @property
    def seconds(self) -> float:
        return self.prefill_s + self.decode_s

    @property
    def generated(self) -> int:
        return self.counted or sum(len(t) for t in self.tokens)


@dataclass
class Stream:
    """A sequence being decoded: its seq_id, the next position, and its reply so far."""

    seq: int
    pos: int
    reply: list[int]


class Decoder:
    """A low-level llama.cpp context with `n_seq` sequences (one KV stream each), greedy."""

    def __init__(self, llm: Llama, n_seq: int, ctx_per_seq: int, n_threads: int) -> None:
        params = lc.llama_context_default_params()
        params.n_ctx = ctx_per_seq * n_seq
        params.n_batch = ctx_per_seq
        params.n_ubatch = min(512, ctx_per_seq)  # the high-level Llama's default
        params.n_seq_max = n_seq
        params.kv_unified = False  # one KV stream per sequence: no attention across them
        params.n_threads = params.n_threads_batch = n_threads
        params.flash_attn_type = lc.LLAMA_FLASH_ATTN_TYPE_DISABLED  # as the high-level Llama
        params.no_perf = True
        model = llm._model.model
        self.ctx = lc.llama_init_from_model(model, params)
        if not self.ctx:
            raise RuntimeError("llama_init_from_model failed")
        self.memory = lc.llama_get_memory(self.ctx)
        self.vocab = lc.llama_model_get_vocab(model)
        self.n_vocab = lc.llama_vocab_n_tokens(self.vocab)
        self.n_seq = n_seq
        self.batch = lc.llama_batch_init(ctx_per_seq, 0, 1)
        self.guard: Guard | None = None

    def close(self) -> None:
        lc.llama_batch_free(self.batch)
        lc.llama_free(self.ctx)

    def _decode(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """One llama_decode of (token, position, seq_id, wants logits) entries."""
        b = self.batch
        b.n_tokens = len(entries)
        for i, (token, pos, seq, logits) in enumerate(entries):
            b.token[i] = token
            b.pos[i] = pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = seq
            b.logits[i] = logits
        rc = lc.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def _greedy(self, row: int) -> int:
        ptr = ctypes.cast(lc.llama_get_logits_ith(self.ctx, row), ctypes.POINTER(ctypes.c_float))
        return int(np.argmax(np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))))  # first max

    def clear(self) -> None:
        lc.llama_memory_clear(self.memory, True)

    def prefill(self, seq: int, prompt: list[int]) -> Stream:
        """Evaluate a prompt into a sequence; its reply starts with the greedy next token."""
        last = len(prompt) - 1
        self._decode([(t, p, seq, p == last) for p, t in enumerate(prompt)])
        if self.guard:
            self.guard.check()
        return Stream(seq, len(prompt), [self._greedy(last)])

    def copy(self, src: int, dst: int) -> None:
        lc.llama_memory_seq_cp(self.memory, src, dst, -1, -1)

    def drop(self, seq: int) -> None:
        lc.llama_memory_seq_rm(self.memory, seq, -1, -1)

    def decode(self, streams: list[Stream], max_new: int, run: Run) -> None:
        """Decode every stream to an end-of-generation token or max_new tokens, all unfinished
        ones in one llama_decode per step. The end token is not part of a reply."""
        active = []
        for s in streams:
            if lc.llama_vocab_is_eog(self.vocab, s.reply[-1]):
                s.reply.pop()
            elif len(s.reply) < max_new:
                active.append(s)
        start = time.perf_counter()
        while active:
            step = time.perf_counter()
            self._decode([(s.reply[-1], s.pos, s.seq, True) for s in active])
            run.steps.setdefault(len(active), []).append(time.perf_counter() - step)
            if self.guard:
                self.guard.check()
            still = []
            for row, s in enumerate(active):
                s.pos += 1
                token = self._greedy(row)
                if lc.llama_vocab_is_eog(self.vocab, token):
                    continue
                s.reply.append(token)
                if len(s.reply) < max_new:
                    still.append(s)
            active = still
        run.decode_s += time.perf_counter() - start
        run.tokens += [s.reply for s in streams]


def low_level(dec: Decoder, prompts: list[list[int]], max_new: int, batched: bool) -> Run:
    """Each prompt in its own sequence: one after another, or all decoded together."""
    run = Run()
    dec.clear()
    streams = []
    for i, prompt in enumerate(prompts):
        seq = i if batched else 0
        start = time.perf_counter()
        stream = dec.prefill(seq, prompt)
        run.prefill_s += time.perf_counter() - start
        if batched:
            streams.append(stream)
        else:
            dec.decode([stream], max_new, run)
            dec.drop(0)
    if batched:
        dec.decode(streams, max_new, run)
    return run


def low_level_group(dec: Decoder, prompt: list[int], k: int, max_new: int, batched: bool) -> Run:
    """k replies to one prompt, prefilled once: its KV cells are copied to each sequence."""
    run = Run()
    dec.clear()
    start = time.perf_counter()
    first = dec.prefill(0, prompt)
    run.prefill_s = time.perf_counter() - start
    streams = [Stream(i + 1, first.pos, list(first.reply)) for i in range(k)]
    for s in streams:
        dec.copy(0, s.seq)
        if not batched:
            dec.decode([s], max_new, run)
            dec.drop(s.seq)
    if batched:
        dec.decode(streams, max_new, run)
    return run


def step_widths(dec: Decoder, prompt: list[int], args: argparse.Namespace) -> None:
    """Median decode-step time by batch width on one shared prompt: the ceiling of what
    batching can gain in decode, before prefill dilutes it."""
    steps: dict[int, list[float]] = {w: [] for w in args.widths}
    for r in range(args.rounds):
        for w in args.widths if r % 2 == 0 else reversed(args.widths):
            for _ in range(3):
                if args.wait_quiet:
                    wait_quiet(args.wait_quiet)
                dec.guard, meter = Guard(2 * args.max_other), CpuMeter()
                try:
                    run = low_level_group(dec, prompt, w, args.width_tokens, batched=True)
                except Busy:
                    continue
                if meter.shares()[0] <= args.max_other:
                    steps[w] += run.steps.get(w, [])
                    break
    one = statistics.median(steps[1]) if steps.get(1) else None
    print("\n  | sequences per decode | step (median) | steps | time vs one | tokens/s vs one |")
    print("  | --- | --- | --- | --- | --- |")
    for w, s in steps.items():
        if not s:
            print(f"  | {w} | no quiet measurement | 0 | | |")
            continue
        med = statistics.median(s)
        rel = (f"{med / one:.2f}× | {w * one / med:.2f}×") if one else " | "
        print(f"  | {w} | {med * 1000:.1f} ms | {len(s)} | {rel} |")


def high_level(
    llm: Llama, messages: list[list[dict]], max_new: int, reset: bool, guard: Guard
) -> Run:
    """The product's path; its time is all in decode_s (prefill is not timed apart). The guard
    is checked between calls, not tokens, so that nothing is added to the path itself."""
    run = Run()
    llm.reset()
    for m in messages:
        if reset:
            llm.reset()  # evaluate the prompt afresh, as the low-level paths do
        start = time.perf_counter()
        out = llm.create_chat_completion(messages=m, temperature=0.0, max_tokens=max_new, seed=0)
        run.decode_s += time.perf_counter() - start
        run.texts.append(out["choices"][0]["message"]["content"] or "")
        run.counted += out["usage"]["completion_tokens"]
        guard.check()
    return run


def judge_messages(n: int) -> list[list[dict]]:
    """n RULER-sized judge prompts: a task and 4 candidate solutions each, asking for scores."""
    tasks = load_humaneval(HumanEvalSettings(offset=10, limit=n))
    out = []
    for task in tasks:
        body = task.prompt + task.canonical_solution
        candidates = [
            body,
            body.replace("return", "return None if False else", 1),
            task.prompt + "    pass\n",
            body + "\n\n# checked by hand\n",
        ]
        shown = "\n\n".join(
            f'<trajectory id="{i}">\n{c}</trajectory>' for i, c in enumerate(candidates, 1)
        )
        out.append([
            {"role": "system", "content": "You are a strict code reviewer. Score each "
             "trajectory between 0 and 1 for how well it solves the task, then explain "
             "briefly."},
            {"role": "user", "content": f"Task:\n{task.request}\n\nTrajectories:\n\n{shown}"},
        ])  # fmt: skip
    return out


def first_divergence(a: list[int], b: list[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def cpu_line() -> str:
    name, flags = "?", []
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and name == "?":
                name = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = [x for x in line.split(":", 1)[1].split() if x.startswith(("avx", "amx"))]
    return f"{name}, {os.cpu_count()} cores, flags {' '.join(flags) or '(no avx/amx)'}"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def report(runs: dict[str, list[Run]], detokenize: Callable[[list[int]], str]) -> None:
    def rate(r: Run) -> float:
        return r.generated / r.seconds

    base = statistics.median(rate(r) for r in runs["sequential"])
    print("\n  | path | tokens | wall (median) | tokens/s | vs sequential | decode tokens/s |")
    print("  | --- | --- | --- | --- | --- | --- |")
    for label, rs in runs.items():
        med = statistics.median(rate(r) for r in rs)
        wall = statistics.median(r.seconds for r in rs)
        # decode steps only: the first token of each reply comes from its prefill
        dec = "—" if label == "high-level" else (
            f"{statistics.median((r.generated - len(r.tokens)) / r.decode_s for r in rs):.1f}"
        )  # fmt: skip
        print(f"  | {label} | {rs[0].generated} | {wall:.2f} s | {med:.1f} | "
              f"{med / base:.2f}× | {dec} |")  # fmt: skip
    pre = {k: statistics.median(r.prefill_s for r in runs[k]) for k in ("sequential", "batched")}
    print(f"  prefill (median): sequential {pre['sequential']:.2f} s, "
          f"batched {pre['batched']:.2f} s")  # fmt: skip
    widths: dict[int, list[float]] = {}
    for label in ("sequential", "batched"):
        for r in runs[label]:
            for w, s in r.steps.items():
                widths.setdefault(w, []).extend(s)
    one = statistics.median(widths[1]) if 1 in widths else None
    for w in sorted(widths):
        med = statistics.median(widths[w])
        rel = (
            f"; {med / one:.2f}× the time of one, {w * one / med:.2f}× its tokens/s" if one else ""
        )
        print(f"  decode step of {w} sequence(s): median {med * 1000:.1f} ms "
              f"over {len(widths[w])} steps{rel}")  # fmt: skip
    for label, rs in runs.items():
        if any(r.tokens != rs[0].tokens or r.texts != rs[0].texts for r in rs):
            print(f"  {label}: replies differ between rounds")
    seq, bat = runs["sequential"][0].tokens, runs["batched"][0].tokens
    hl = runs["high-level"][0].texts
    for i, (a, b, h) in enumerate(zip(seq, bat, hl, strict=True)):
        d = first_divergence(a, b)
        same = "identical" if d is None else f"DIFFER from token {d} of {len(a)}/{len(b)}"
        hsame = "same text" if detokenize(a) == h else "DIFFERENT text"
        print(f"  reply {i} ({len(a)} tokens): sequential vs batched {same}; "
              f"high-level vs sequential {hsame}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen-0.5b", help="registry name in params.yaml")
    ap.add_argument("--rounds", type=int, default=2, help="alternating rounds per workload")
    ap.add_argument("--k", type=int, default=4, help="sequences per workload")
    ap.add_argument("--rollout-tokens", type=int, default=128)
    ap.add_argument("--judge-tokens", type=int, default=48)
    ap.add_argument(
        "--workloads", nargs="+", default=["widths", "rollouts", "group", "judge"],
        choices=["widths", "rollouts", "group", "judge"],
    )  # fmt: skip
    ap.add_argument("--widths", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--width-tokens", type=int, default=32, help="new tokens per width run")
    ap.add_argument(
        "--wait-quiet", type=float, default=60.0,
        help="before each measurement, wait up to this many seconds for 3 quiet seconds "
        "(other processes < 10%% of the cores); 0: do not wait",
    )  # fmt: skip
    ap.add_argument(
        "--max-other", type=float, default=0.15,
        help="a round in which other processes used more than this share of the cores (or "
        "twice it over any 3 s) is abandoned and run again (at most 3x --rounds attempts)",
    )  # fmt: skip
    ap.add_argument("--budget", type=float, default=20.0, help="minutes; no round starts after")
    args = ap.parse_args()
    settings = load_settings("params.yaml")
    threads = settings.server.n_threads
    path = str(ensure_model(settings.models[args.model].zoo))
    print(cpu_line())
    print(f"uptime before: {uptime()}")

    tasks = load_humaneval(HumanEvalSettings(offset=0, limit=args.k))
    rollout = [policy_messages(RolloutSettings(), t) for t in tasks]
    messages = {"rollouts": rollout, "group": rollout[:1] * args.k, "judge": judge_messages(args.k)}
    new = {
        "rollouts": args.rollout_tokens,
        "group": args.rollout_tokens,
        "judge": args.judge_tokens,
    }

    with model_lock():
        deadline = time.monotonic() + 60 * args.budget
        whole = CpuMeter()
        llm = Llama(path, n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False)
        template = Jinja2ChatFormatter(
            template=llm.metadata["tokenizer.chat_template"],
            eos_token=llm._model.token_get_text(llm.token_eos()),
            bos_token=llm._model.token_get_text(llm.token_bos()),
        )
        # + 1: the shared prompt of a group
        dec = Decoder(llm, max(args.k, *args.widths) + 1, 4096, threads)
        if "widths" in args.workloads:
            prompt = template(messages=messages["group"][0]).prompt.encode()
            print(f"\nwidths: decode steps of {args.widths} sequences sharing one prompt, "
                  f"{args.width_tokens} tokens each, greedy, {threads} threads")  # fmt: skip
            step_widths(dec, llm.tokenize(prompt, add_bos=False, special=True), args)
        for name in args.workloads:
            if name == "widths":
                continue
            msgs, n = messages[name], new[name]
            prompts = [
                llm.tokenize(template(messages=m).prompt.encode(), add_bos=False, special=True)
                for m in msgs
            ]
            print(f"\n{name}: {len(prompts)} replies to prompts of {[len(p) for p in prompts]} "
                  f"tokens, <= {n} new tokens each, greedy, {threads} threads")  # fmt: skip
            group = name == "group"
            paths: dict[str, Callable[[Guard], Run]] = {
                # a group shares its prompt with the previous call: the prefix cache reuses it
                "high-level": lambda guard, m=msgs, n=n, g=group: (
                    high_level(llm, m, n, reset=not g, guard=guard)
                ),
                "sequential": lambda _, p=prompts, n=n, g=group: (
                    low_level_group(dec, p[0], len(p), n, False) if g
                    else low_level(dec, p, n, False)
                ),
                "batched": lambda _, p=prompts, n=n, g=group: (
                    low_level_group(dec, p[0], len(p), n, True) if g
                    else low_level(dec, p, n, True)
                ),
            }  # fmt: skip
            runs: dict[str, list[Run]] = {k: [] for k in paths}
            attempt = 0
            while len(runs["sequential"]) < args.rounds and attempt < 3 * args.rounds:
                if time.monotonic() > deadline:
                    print(f"  --budget of {args.budget:.0f} min spent: no more rounds")
                    break
                r, attempt = len(runs["sequential"]), attempt + 1
                done: dict[str, Run] = {}
                try:
                    for label in paths if r % 2 == 0 else reversed(paths):
                        waited = wait_quiet(args.wait_quiet) if args.wait_quiet else 0.0
                        guard = dec.guard = Guard(2 * args.max_other)
                        meter = CpuMeter()
                        run = done[label] = paths[label](guard)
                        run.other = meter.shares()[0]
                        print(f"  round {r} {label:10s} {run.seconds:6.2f} s  (prefill "
                              f"{run.prefill_s:5.2f} s, decode {run.decode_s:6.2f} s)  "
                              f"{run.generated} tokens; others used {run.other:.0%} of the "
                              f"cores (waited {waited:.0f} s)", flush=True)  # fmt: skip
                        if run.other > args.max_other:
                            raise Busy(f"others used {run.other:.0%} of the cores during it")
                except Busy as busy:
                    print(f"  round {r} discarded ({label}): {busy}", flush=True)
                    continue
                for label, run in done.items():
                    runs[label].append(run)
            if not runs["sequential"]:
                print("  no round was quiet enough to keep")
                continue
            report(runs, lambda t: llm.detokenize(t).decode("utf-8", errors="replace"))
        dec.close()
        print(f"\nload during the run: {whole.report()}")
    print(f"uptime after: {uptime()}")


if __name__ == "__main__":
    main()
