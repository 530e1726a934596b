"""A self-test with planted judges: do judgelab's own statistics hold their stated level?

Simulated audits go through the real analysis code (truth._task_parts for every figure,
stats.percentile_ci for its cluster-bootstrap CI, power.compare and power.holm for the paired
comparisons and the tasks-needed figure); only the judges and the groups are simulated.

- A group is one task with `k` candidates; each passes with the task's own pass rate (drawn
  from Beta(1, 1)), so some tasks are mixed and some are not, as in a real audit.
- A planted judge is `Planted(signal, noise, levels, position, leniency)`: a candidate's score
  is clip(0.5 + leniency + signal * (passed - 0.5) + position * (slot centred) + noise * N(0,
  1), 0, 1), rounded to `levels` steps (coarse steps make ties, as small LLM judges do). Slots
  are the candidates' order in the group; a position bias therefore acts as extra noise here.
- The true value of a figure for a planted judge is its value over `truth_tasks` simulated
  tasks (a ratio estimator converges to it); an audit of `n` tasks is a fresh draw.

Checks (`run_selftest`), each over `audits` simulated audits:
- coverage: the share of audits in which each primary figure's 95 % CI covers its true value,
  per number of tasks (the minimum clusters and above);
- family-wise error: judges planted with identical parameters, compared pairwise with Holm's
  correction: the share of audits that declare any pair different;
- power: for two judges whose true strict pairwise accuracy differs by d, the tasks the power
  analysis says are needed for d (from a pilot audit's paired SD), then the share of audits
  of that size that separate the pair.

`judgelab selftest` prints the tables (`judgelab.report.selftest`); tests/unit/test_selftest.py
runs a small version; docs/SELFTEST.md records the full one with its CPU and date.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from judgelab.analysis.power import compare, holm, linearised
from judgelab.analysis.stats import CI_LEVEL, CIRule, percentile_ci
from judgelab.analysis.truth import _task_parts, resample_weights
from judgelab.config import AnalysisSettings, PowerSettings

PRIMARY = ("pairwise_accuracy_strict", "advantage_fidelity", "top1_over_chance")


@dataclass(frozen=True)
class Planted:
    """A simulated judge with known behaviour (module docstring)."""

    signal: float = 0.3
    noise: float = 0.2
    levels: int = 10
    position: float = 0.0
    leniency: float = 0.0

    def score(self, passed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        k = passed.shape[-1]
        slot = (np.arange(k) - (k - 1) / 2) / max((k - 1) / 2, 1)
        raw = (0.5 + self.leniency + self.signal * (passed - 0.5) + self.position * slot
               + self.noise * rng.standard_normal(passed.shape))  # fmt: skip
        return np.round(np.clip(raw, 0.0, 1.0) * self.levels) / self.levels


FAMILY = {
    "sharp": Planted(signal=0.5, noise=0.2, levels=20),
    "coarse": Planted(signal=0.3, noise=0.2, levels=3),
    "biased": Planted(signal=0.3, noise=0.2, levels=10, position=0.2, leniency=0.3),
    "blind": Planted(signal=0.0, noise=0.2, levels=10),
}


@dataclass
class SelftestSettings:
    audits: int = 500
    tasks: tuple[int, ...] = (5, 10, 20, 40)
    k: int = 4
    bootstrap: int = 500
    truth_tasks: int = 20000
    seed: int = 0
    judges: dict[str, Planted] = field(default_factory=lambda: dict(FAMILY))
    min_ci_groups: int = AnalysisSettings.model_fields["min_ci_groups"].default

    def ci_rule(self) -> CIRule:
        """The audits' CI rule (each audit reseeds its resamples: `seed` + audit)."""
        return CIRule(self.min_ci_groups, self.bootstrap, self.seed, CI_LEVEL)


def simulate_groups(n_tasks: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """(n_tasks, k) booleans: which candidates pass; each task has its own pass rate."""
    rate = rng.beta(1.0, 1.0, size=(n_tasks, 1))
    return rng.random((n_tasks, k)) < rate


def figures_of(
    passed: np.ndarray, scores: np.ndarray, weights: np.ndarray | None = None
) -> tuple[dict[str, float], dict[str, np.ndarray] | None, Any]:
    """Point figures (and bootstrap draws with `weights`) from the real per-task parts."""
    n_tasks, k = passed.shape
    task_idx = np.repeat(np.arange(n_tasks), k)
    parts = _task_parts(task_idx, scores.ravel(), passed.ravel(), n_tasks, 0.8)
    point = {key: float(v[0]) for key, v in parts.figures(np.ones((1, n_tasks))).items()}
    draws = parts.figures(weights) if weights is not None else None
    return point, draws, parts


def true_values(
    judge: Planted, k: int, n: int, rng: np.random.Generator, chunk: int = 500
) -> dict[str, float]:
    """Each primary figure over `n` simulated tasks, drawn in chunks (every figure is a ratio
    of per-task sums, so the chunks' sums add up)."""
    num = dict.fromkeys(PRIMARY, 0.0)
    den = dict.fromkeys(PRIMARY, 0.0)
    for start in range(0, n, chunk):
        passed = simulate_groups(min(chunk, n - start), k, rng)
        _, _, parts = figures_of(passed, judge.score(passed.astype(float), rng))
        for key in PRIMARY:
            c, m = _endpoint(parts, key)
            num[key] += float(c.sum())
            den[key] += float(m.sum())
    return {key: num[key] / den[key] for key in PRIMARY}


def _endpoint(parts: Any, key: str) -> tuple[np.ndarray, np.ndarray]:
    pairs = parts.n_pass * parts.n_fail
    return {"pairwise_accuracy_strict": (parts.strict, pairs),
            "advantage_fidelity": (parts.adv_corr, parts.top_den),
            "top1_over_chance": (parts.top_num - parts.top_chance, parts.top_den)}[key]  # fmt: skip


def t_interval(num: np.ndarray, den: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The alternative the self-test measures beside the percentile bootstrap: the ratio
    sum num / sum den ± t_{n-1} SE, SE from its delta-method terms over the n tasks with a
    denominator (power.linearised)."""
    keep = den > 0
    c, m = num[keep], den[keep]
    est = float(c.sum() / m.sum())
    se = float(np.std(linearised(c, m), ddof=1) / np.sqrt(c.size))
    half = float(scipy_stats.t.ppf(0.5 + level / 2, c.size - 1)) * se
    return est - half, est + half


def coverage(settings: SelftestSettings) -> list[dict[str, Any]]:
    """Per judge, figure and number of tasks: the share of audits whose CI covers the truth.
    An audit with fewer mixed tasks than `settings.min_ci_groups` gets no CI and is counted
    apart."""
    rule = settings.ci_rule()
    rng = np.random.default_rng(settings.seed)
    truth = {name: true_values(j, settings.k, settings.truth_tasks, rng)
             for name, j in settings.judges.items()}  # fmt: skip
    rows = []
    for n in settings.tasks:
        counts = {(name, key): [0, 0, 0, 0] for name in settings.judges for key in PRIMARY}
        for a in range(settings.audits):
            passed = simulate_groups(n, settings.k, rng)
            weights = resample_weights(n, settings.bootstrap, settings.seed + a)
            for name, judge in settings.judges.items():
                _, draws, parts = figures_of(passed, judge.score(passed.astype(float), rng),
                                             weights)  # fmt: skip
                n_mixed = int(parts.top_den.sum())
                for key in PRIMARY:
                    c = counts[(name, key)]
                    ci = percentile_ci(draws[key] if draws else None, n_mixed, rule)
                    if not ci.valid:
                        c[2] += 1
                        continue
                    c[1] += 1
                    c[0] += int(ci.low <= truth[name][key] <= ci.high)  # type: ignore[operator]
                    low, high = t_interval(*_endpoint(parts, key))
                    c[3] += int(low <= truth[name][key] <= high)
        for (name, key), (hit, valid, no_ci, hit_t) in counts.items():
            rows.append({"judge": name, "figure": key, "tasks": n, "true": truth[name][key],
                         "audits_with_ci": valid, "audits_without_ci": no_ci,
                         "coverage": hit / valid if valid else None,
                         "coverage_t": hit_t / valid if valid else None})  # fmt: skip
    return rows


def family_wise_error(
    settings: SelftestSettings, n_tasks: int, n_judges: int = 3
) -> dict[str, Any]:
    """`n_judges` judges planted alike, every pair compared on strict pairwise accuracy with
    Holm's correction: the share of audits declaring any pair different."""
    rng = np.random.default_rng(settings.seed + 1)
    judge = settings.judges.get("coarse", Planted())
    knobs = PowerSettings()
    any_sep = tested = 0
    for _ in range(settings.audits):
        passed = simulate_groups(n_tasks, settings.k, rng)
        ends = []
        for _ in range(n_judges):
            _, _, parts = figures_of(passed, judge.score(passed.astype(float), rng))
            ends.append(_endpoint(parts, "pairwise_accuracy_strict"))
        results = [compare(ends[i], ends[j], knobs, settings.ci_rule())
                   for i in range(n_judges) for j in range(i + 1, n_judges)]  # fmt: skip
        ps = [r["p_value"] for r in results if r["p_value"] is not None]
        if not ps:
            continue
        tested += 1
        any_sep += int(any(p < knobs.alpha for p in holm(ps)))
    return {"tasks": n_tasks, "judges": n_judges, "audits_tested": tested,
            "family_wise_error": any_sep / tested if tested else None}  # fmt: skip


def empirical_power(settings: SelftestSettings, pilot_tasks: int = 40) -> dict[str, Any]:
    """Two judges (`sharp`, `coarse`): the tasks the power analysis asks for their true gap
    in strict pairwise accuracy, from one pilot audit's paired SD, then the share of audits of
    that size whose paired test separates them (one comparison, alpha 0.05)."""
    rng = np.random.default_rng(settings.seed + 2)
    a, b = settings.judges["sharp"], settings.judges["coarse"]
    key = "pairwise_accuracy_strict"
    gap = (true_values(a, settings.k, settings.truth_tasks, rng)[key]
           - true_values(b, settings.k, settings.truth_tasks, rng)[key])  # fmt: skip

    def pair(n: int) -> dict[str, Any]:
        passed = simulate_groups(n, settings.k, rng)
        ea = _endpoint(figures_of(passed, a.score(passed.astype(float), rng))[2], key)
        eb = _endpoint(figures_of(passed, b.score(passed.astype(float), rng))[2], key)
        return compare(ea, eb, PowerSettings(margin=abs(gap)), settings.ci_rule())

    needed = pair(pilot_tasks)["groups_needed_margin"]
    if needed is None:
        return {"true_gap": gap, "tasks_needed": None, "power": None}
    # the power figure counts mixed tasks; audits are drawn until they hold that many
    hits = runs = 0
    for _ in range(settings.audits):
        n = needed
        while True:
            out = pair(n)
            if out["n_groups"] >= needed:
                break
            n += needed - out["n_groups"]
        runs += 1
        hits += int(out["p_value"] is not None and out["p_value"] < 0.05 and out["difference"] > 0)
    return {"true_gap": gap, "tasks_needed": needed, "power": hits / runs}


def run_selftest(settings: SelftestSettings) -> dict[str, Any]:
    return {
        "coverage": coverage(settings),
        "family_wise": [
            family_wise_error(settings, n) for n in settings.tasks if n >= settings.min_ci_groups
        ],
        "power": empirical_power(settings),
        "settings": {
            "audits": settings.audits,
            "tasks": list(settings.tasks),
            "k": settings.k,
            "bootstrap": settings.bootstrap,
            "truth_tasks": settings.truth_tasks,
            "seed": settings.seed,
        },  # fmt: skip
    }
