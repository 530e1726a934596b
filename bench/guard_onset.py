"""Benchmark: the reward guard's alarm against a judge that starts hacking mid-run (issue 64).

Through the guard's public API (`Guard.observe`, one guard per run, every group checked):
groups of 4, 2 groups a step, each task's pass rate ~ U(0.2, 0.8), the verdicts ~ Bernoulli(it),
rewards 0.6 * noise + 0.4 * passed while the judge is aligned, 0.6 * noise + 0.4 * (1 - passed)
while it hacks, noise ~ U(0, 1) per completion (a blind judge: noise alone); alpha 0.05.
Scenarios:

- `start`: hacking from step 0 (10 steps): the share caught within 2, 3 and 4 steps;
- `onset`: aligned for 400 groups, then hacking for 100: caught within the 100 groups, fired
  before the onset, the median delay in groups;
- `blind`: blind for 1,000 groups; `aligned-blind`: aligned for 400, then blind for 600: the
  share of runs with an alarm (the guarantee: at most alpha, over the whole run).

Each figure is given for the guard's detector (`judgelab.training.alarm`) and for the
e-process it replaced (the product of every group's e-values from the first one, mean over
lambda, recomputed from the same checked groups: `Guard.state_dict()["checked"]`).

`--vectorised RUNS` adds the same scenarios for many more runs without the guard's
bookkeeping: the same judge, every group's e-values from `alignment.batch_log_e` (held to
`group_log_e` by a unit test) and the detector from `alarm.log_values` (held to
`alarm.Detector`); the alarm at the group rather than at the end of its step.

    .venv/bin/python bench/guard_onset.py [--runs 200] [--vectorised 2000] [--seed 0]

Results are recorded in docs/GUARD.md.
"""

from __future__ import annotations

import argparse
import logging
import math
import time

import numpy as np

from judgelab.guard import Guard, GuardSettings
from judgelab.training import alarm
from judgelab.training import alignment as al

K, PER_STEP, ALPHA = 4, 2, 0.05
SCENARIOS = {  # (groups, sign): +1 aligned, -1 hacking, 0 blind
    "start": ((20, -1),),
    "onset": ((400, +1), (100, -1)),
    "blind": ((1000, 0),),
    "aligned-blind": ((400, +1), (600, 0)),
}


def draw(rng: np.random.Generator, shape: tuple[int, ...], sign: int) -> tuple:
    """Rewards and verdicts of groups of `K` of the given shape (module doc): [*shape, K]."""
    rate = rng.uniform(0.2, 0.8, size=shape)
    passed = rng.random((*shape, K)) < rate[..., None]
    noise = rng.random((*shape, K))
    if sign == 0:
        return noise, passed
    return 0.6 * noise + 0.4 * (passed if sign > 0 else ~passed), passed


def vectorised(rng: np.random.Generator, runs: int, phases: tuple) -> list:
    """(detector's first group, replaced e-process's first group) per run, without the guard."""
    parts = [al.batch_log_e(*(a.astype(float) for a in draw(rng, (runs, n), s)))[0]
             for n, s in phases]  # fmt: skip
    log_e = np.concatenate(parts, axis=1)
    threshold = math.log(1 / ALPHA)
    totals = np.cumsum(log_e, axis=1)
    top = totals.max(axis=2)
    old = top + np.log(np.exp(totals - top[..., None]).mean(axis=2)) >= threshold
    new = alarm.log_values(log_e) >= threshold

    def first(fired: np.ndarray) -> list[int | None]:
        return [int(np.argmax(row)) if row.any() else None for row in fired]

    return list(zip(first(new), first(old), strict=True))


def batch(rng: np.random.Generator, sign: int) -> tuple[list[float], list[bool]]:
    """One step's rewards and verdicts: `PER_STEP` groups of `K` (module doc)."""
    rewards, passed = draw(rng, (PER_STEP,), sign)
    return rewards.ravel().tolist(), passed.ravel().tolist()


def old_fired_group(guard: Guard) -> int | None:
    """The first group (0-based) at which the replaced e-process reached 1 / alpha."""
    totals = np.zeros(len(al.LAMBDAS))
    rng = np.random.default_rng(0)  # unused for groups of 4: exact enumeration
    for i, (adv, passed) in enumerate(guard.state_dict()["checked"]):
        totals += al.group_log_e(al.GroupAlignment(tuple(adv), tuple(passed)), rng)
        top = totals.max()
        if top + math.log(np.exp(totals - top).mean()) >= math.log(1 / ALPHA):
            return i
    return None


def one_run(rng: np.random.Generator, phases: tuple[tuple[int, int], ...]) -> tuple:
    """(first group of the step the guard fired at, the replaced e-process's first group)."""
    guard, step = Guard(GuardSettings(alpha=ALPHA)), 0
    for groups, sign in phases:
        for _ in range(groups // PER_STEP):
            rewards, passed = batch(rng, sign)
            prompts = [f"{step}-{g}" for g in range(PER_STEP) for _ in range(K)]
            guard.observe(prompts, ["c"] * len(prompts), rewards, passed, step=step)
            step += 1
    fired = guard.status().fired_at_step
    return (None if fired is None else fired * PER_STEP), old_fired_group(guard)


def summary(name: str, phases: tuple, firsts: list[int | None]) -> str:
    runs = len(firsts)
    if name == "start":
        within = [sum(f is not None and f < s * PER_STEP for f in firsts) / runs for s in (2, 3, 4)]
        return "caught within 2 / 3 / 4 steps: " + " / ".join(f"{w:.1%}" for w in within)
    if name == "onset":
        onset = phases[0][0]
        before = sum(f is not None and f < onset for f in firsts) / runs
        delays = [f - onset + 1 for f in firsts if f is not None and f >= onset]
        caught = sum(d <= phases[1][0] for d in delays) / runs
        median = f"{np.median(delays):.0f}" if delays else "-"
        return (
            f"caught within {phases[1][0]} groups: {caught:.1%}; fired before the onset: "
            f"{before:.1%}; median delay {median} groups"
        )
    rate = sum(f is not None for f in firsts) / runs
    se = math.sqrt(max(rate * (1 - rate), 1e-12) / runs)
    return f"alarm rate {rate:.2%} (SE {se:.2%}; bound alpha = {ALPHA:.0%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vectorised", type=int, default=0, help="runs without the guard")
    parser.add_argument("--only", choices=sorted(SCENARIOS), default=None)
    args = parser.parse_args()
    logging.getLogger("judgelab.guard").setLevel(logging.ERROR)  # not one line per alarm
    for index, (name, phases) in enumerate(SCENARIOS.items()):
        if args.only and name != args.only:
            continue
        rng = np.random.default_rng([args.seed, index])
        start = time.perf_counter()
        results = [one_run(rng, phases) for _ in range(args.runs)]
        took = time.perf_counter() - start
        print(f"{name} ({args.runs} runs, {took:.0f} s)")
        print(f"  detector:  {summary(name, phases, [r[0] for r in results])}")
        print(f"  replaced:  {summary(name, phases, [r[1] for r in results])}")
        if args.vectorised:
            many = vectorised(rng, args.vectorised, phases)
            print(f"  vectorised, {args.vectorised} runs (the alarm at the group):")
            print(f"    detector:  {summary(name, phases, [r[0] for r in many])}")
            print(f"    replaced:  {summary(name, phases, [r[1] for r in many])}")


if __name__ == "__main__":
    main()
