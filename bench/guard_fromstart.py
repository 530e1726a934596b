"""Benchmark: readings of issue 64's "hacking from step 0: caught within 2 steps in 40 of 40 runs".

Through `Guard.observe` of whichever judgelab is on PYTHONPATH (the public API is the same
before and after issue 64), so the guard before issue 64 is measured by running this file with
PYTHONPATH pointing at a checkout of that commit (c9025004):

    git worktree add /tmp/old c9025004
    PYTHONPATH=/tmp/old/src .venv/bin/python bench/guard_fromstart.py   # the replaced e-process
    PYTHONPATH=src .venv/bin/python bench/guard_fromstart.py            # the detector

The judge hacks from step 0: groups of 4, `--per-step` groups a step (the issue: 2), each task's
pass rate ~ U(0.2, 0.8), the verdicts ~ Bernoulli(it), rewards 0.6 * noise + 0.4 * (1 - passed),
GuardSettings(alpha=0.05) otherwise at its defaults (every group with spread checked). Readings
of "noise": `u01` U(0, 1) per completion (the issue's words, bench/guard_onset.py's model),
`grid` the same rounded to 0.1 (RULER's grid), `normal` N(0, 1) per completion, `group` one
U(0, 1) draw per group (the judge's order within a group is then exactly anti-aligned: the most
any judge of this kind gives the alarm). Printed: the share of runs fired at step 0, at step <= 1
("within 2 steps", steps counted from 0), <= 2 and <= 3.

`bound` is no guard at all: the share of runs in which the product over the first groups of
C(4, m) (m the group's passing completions; 1 when the tests do not split the group) reaches
1 / alpha. A group's e-value against a blind judge averages 1 over the C(4, m) equally likely
sets of passing places, so it is at most C(4, m), and no alarm built from such e-values (a
product, a mixture over lambda or over change points) can fire where that product is below
1 / alpha, whatever the judge does.

    .venv/bin/python bench/guard_fromstart.py [--runs 400] [--per-step 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import logging
import math

import numpy as np

from judgelab.guard import Guard, GuardSettings

K, ALPHA, STEPS = 4, 0.05, 4
READINGS = ("u01", "grid", "normal", "group")


def rewards(rng: np.random.Generator, reading: str, passed: np.ndarray) -> np.ndarray:
    """The hacking judge's rewards for `passed` ([groups, K]) under a reading of "noise"."""
    if reading == "group":
        noise = np.repeat(rng.random(passed.shape[0])[:, None], K, axis=1)
    elif reading == "normal":
        noise = rng.standard_normal(passed.shape)
    else:
        noise = rng.random(passed.shape)
    out = 0.6 * noise + 0.4 * ~passed
    return np.round(out, 1) if reading == "grid" else out


def one_run(rng: np.random.Generator, reading: str, per_step: int) -> int | None:
    """The step (from 0) at which the guard fired, None if not within `STEPS` steps."""
    guard = Guard(GuardSettings(alpha=ALPHA))
    for step in range(STEPS):
        rate = rng.uniform(0.2, 0.8, size=per_step)
        passed = rng.random((per_step, K)) < rate[:, None]
        prompts = [f"{step}-{g}" for g in range(per_step) for _ in range(K)]
        r = rewards(rng, reading, passed).ravel().tolist()
        if guard.observe(prompts, ["c"] * len(prompts), r, passed.ravel().tolist(), step=step):
            return step
    return None


def bound(rng: np.random.Generator, runs: int, per_step: int) -> list[int | None]:
    """The first step at which the product of the groups' C(4, m) reaches 1 / alpha (doc)."""
    rate = rng.uniform(0.2, 0.8, size=(runs, STEPS * per_step))
    m = (rng.random((runs, STEPS * per_step, K)) < rate[..., None]).sum(axis=2)
    most = np.array([math.comb(K, j) for j in range(K + 1)], dtype=float)[m]
    fired = np.cumsum(np.log(most), axis=1) >= math.log(1 / ALPHA) - 1e-12
    return [int(np.argmax(row)) // per_step if row.any() else None for row in fired]


def line(name: str, steps: list[int | None]) -> str:
    shares = [sum(s is not None and s <= last for s in steps) / len(steps) for last in range(4)]
    return f"{name:7s} fired by the end of step 0 / 1 / 2 / 3: " + " / ".join(
        f"{s:.1%}" for s in shares
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--per-step", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logging.getLogger("judgelab").setLevel(logging.ERROR)  # not one line per alarm
    print(f"{args.runs} runs, groups of {K}, {args.per_step} groups a step, alpha {ALPHA}")
    for index, reading in enumerate(READINGS):
        rng = np.random.default_rng([args.seed, index])
        print(line(reading, [one_run(rng, reading, args.per_step) for _ in range(args.runs)]))
    rng = np.random.default_rng([args.seed, len(READINGS)])
    print(line("bound", bound(rng, args.runs, args.per_step)))


if __name__ == "__main__":
    main()
