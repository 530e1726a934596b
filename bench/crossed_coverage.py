"""Does the crossed bootstrap cover the effect over tasks AND banks? (numpy only, seconds)

Simulates the first-order study's terms as a crossed random-effects design,
N_tb = D_t (mu + a_t + b_b + e_tb) with a_t ~ N(0, sa), b_b ~ N(0, sb), e_tb ~ N(0, se),
D_t in {2, 4}: the population effect is mu, over the draw of training tasks and of bank
tasks. For each replicate, the 95 % CI of `analysis.crossed.crossed_t_ci` (tasks and bank
tasks resampled) and of `stats.bootstrap_t_ci` on the bank's mean (the bank held fixed),
and how often each covers mu.

    python bench/crossed_coverage.py [--reps 300] [--tasks 56] [--banks 8] [--sb 0.5]

Results: docs/TRAINING.md ("Does the audit predict training?").
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from judgelab.analysis.crossed import bank_resample_weights, crossed_t_ci
from judgelab.analysis.stats import bootstrap_t_ci, resample_weights


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--boot", type=int, default=500)
    ap.add_argument("--tasks", type=int, default=56)
    ap.add_argument("--banks", type=int, default=8)
    ap.add_argument("--sa", type=float, default=1.0)
    ap.add_argument("--sb", type=float, default=0.5)
    ap.add_argument("--se", type=float, default=0.5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    mu = 0.3
    w = resample_weights(args.tasks, args.boot, 0)
    v = bank_resample_weights(args.banks, args.boot, 0)
    cover = {"crossed": 0, "bank_fixed": 0}
    width = {"crossed": [], "bank_fixed": []}
    for _ in range(args.reps):
        den = rng.choice([2.0, 4.0], size=args.tasks)
        a = rng.normal(0, args.sa, (args.tasks, 1))
        b = rng.normal(0, args.sb, (1, args.banks))
        e = rng.normal(0, args.se, (args.tasks, args.banks))
        num = den[:, None] * (mu + a + b + e)
        for name, ci in (("crossed", crossed_t_ci(num, den, w, v, 5)),
                         ("bank_fixed", bootstrap_t_ci(num.mean(axis=1), den, w, 5))):  # fmt: skip
            cover[name] += int(ci.low <= mu <= ci.high)  # type: ignore[operator]
            width[name].append(ci.high - ci.low)  # type: ignore[operator]
    print(
        json.dumps(
            {
                "settings": vars(args),
                "mu": mu,
                "coverage": {k: c / args.reps for k, c in cover.items()},
                "mean_width": {k: float(np.mean(x)) for k, x in width.items()},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
