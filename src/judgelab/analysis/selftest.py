"""A self-test with planted judges: do judgelab's own statistics hold their stated level?

Simulated audits go through the real analysis code (truth._task_parts for every figure,
truth._interval for the CI each figure gets in metrics.json, power.compare and power.holm for
the paired comparisons and the tasks-needed figure); only the judges and the groups are
simulated.

- A group is one task with `k` candidates; each passes with the task's own pass rate (drawn
  from Beta(1, 1)), so some tasks are mixed and some are not, as in a real audit.
- A planted judge is `Planted(signal, noise, levels, position, leniency)`: a candidate's score
  is clip(0.5 + leniency + signal * (passed - 0.5) + position * (slot centred) + noise * N(0,
  1), 0, 1), rounded to `levels` steps (coarse steps make ties, as small LLM judges do). Slots
  are the candidates' order in the group; a position bias therefore acts as extra noise here.
- The true value of a figure for a planted judge is its value over `truth_tasks` simulated
  tasks (a ratio estimator converges to it). An audit holding `n` clusters is a fresh draw of
  tasks until `n` of them are mixed (the figures' clusters; the other tasks are resampled
  too, as in an analysis).

Checks (`run_selftest`), each over `audits` simulated audits:
- coverage: the share of audits in which each primary figure's 95 % CI covers its true value,
  per number of mixed clusters, for the interval judgelab uses (`truth._interval`) and the
  alternatives it was chosen over: the percentile bootstrap, BCa and the jackknife t;
- family-wise error: judges planted with identical parameters, compared pairwise with Holm's
  correction: the share of audits that declare any pair different;
- power: for two judges whose true strict pairwise accuracy differs by d, the tasks the power
  analysis says are needed for d (from a pilot audit's paired SD), then the share of audits
  of that size that separate the pair.

`judgelab selftest` prints the table; tests/unit/test_selftest.py runs a small version;
docs/SELFTEST.md records the full one with its CPU and date.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from judgelab.analysis.power import compare, holm
from judgelab.analysis.stats import CI_LEVEL, CIRule, Interval, percentile_ci, t_ci
from judgelab.analysis.truth import _interval, _task_parts, resample_weights
from judgelab.config import AnalysisSettings, PowerSettings

# The primary endpoints and the within-group false praise, the figure GRPO users read beside them.
PRIMARY = (
    "pairwise_accuracy_strict",
    "advantage_fidelity",
    "top1_over_chance",
    "false_praise_within_group",
)
INTERVALS = ("used", "percentile", "bca", "jackknife_t")


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
    clusters: tuple[int, ...] = (5, 8, 10, 15, 20, 40)  # mixed tasks per simulated audit
    k: int = 4
    bootstrap: int = 500
    truth_tasks: int = 20000
    seed: int = 0
    judges: dict[str, Planted] = field(default_factory=lambda: dict(FAMILY))
    min_ci_groups: int = AnalysisSettings.model_fields["min_ci_groups"].default

    def ci_rule(self, min_groups: int) -> CIRule:
        """The audits' CI rule from `min_groups` clusters (each audit reseeds its resamples)."""
        return CIRule(min_groups, self.bootstrap, self.seed, CI_LEVEL)


def simulate_groups(n_tasks: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """(n_tasks, k) booleans: which candidates pass; each task has its own pass rate."""
    rate = rng.beta(1.0, 1.0, size=(n_tasks, 1))
    return rng.random((n_tasks, k)) < rate


def simulate_audit(n_mixed: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Tasks drawn until exactly `n_mixed` of them are mixed (pass and fail), in draw order."""
    drawn: list[np.ndarray] = []
    found = 0
    while found < n_mixed:
        batch = simulate_groups(2 * n_mixed, k, rng)
        mixed = np.cumsum(batch.any(axis=1) & ~batch.all(axis=1)) + found
        stop = int(np.searchsorted(mixed, n_mixed)) + 1 if mixed[-1] >= n_mixed else batch.shape[0]
        drawn.append(batch[:stop])
        found = int(mixed[stop - 1])
    return np.concatenate(drawn)


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
            "top1_over_chance": (parts.top_num - parts.top_chance, parts.top_den),
            "false_praise_within_group": (parts.fail_at_pass, parts.n_fail_mixed)}[key]  # fmt: skip


def bca_interval(point: float, draws: np.ndarray, jackknife: np.ndarray,
                 level: float = 0.95) -> tuple[float, float]:  # fmt: skip
    """Efron's BCa interval (an alternative measured here): bias correction z0 from the share
    of draws below the point (ties count half), acceleration from the jackknife's skew."""
    d = draws[np.isfinite(draws)]
    below = (np.sum(d < point) + 0.5 * np.sum(d == point)) / d.size
    z0 = scipy_stats.norm.ppf(min(max(below, 0.5 / d.size), 1 - 0.5 / d.size))
    dev = jackknife.mean() - jackknife
    spread = 6.0 * float(np.sum(dev**2)) ** 1.5
    accel = float(np.sum(dev**3)) / spread if spread > 0 else 0.0
    z = scipy_stats.norm.ppf([(1 - level) / 2, (1 + level) / 2])
    q = scipy_stats.norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z)))
    low, high = np.quantile(d, q)
    return float(low), float(high)


def _counts(parts: Any) -> dict[str, Any]:
    """The unit counts truth_metrics passes to truth._interval (Wilson's units)."""
    return {"n_pairs": float((parts.n_pass * parts.n_fail).sum()),
            "n_top1_groups": float(parts.top_den.sum()),
            "n_failing_mixed": float(parts.n_fail_mixed.sum()),
            "n_failing": float(parts.n_fail.sum()),
            "n_pass_fail_pairs": float(parts.n_pass.sum() * parts.n_fail.sum())}  # fmt: skip


def audit_intervals(
    parts: Any, weights: np.ndarray, rule: CIRule
) -> dict[str, dict[str, Interval | tuple]]:
    """Per primary figure: the interval judgelab uses and the alternatives, for one audit."""
    n_t = parts.n_pass.size
    point = {key: float(v[0]) for key, v in parts.figures(np.ones((1, n_t))).items()}
    draws = parts.figures(weights)
    jack = parts.figures(np.ones((n_t, n_t)) - np.eye(n_t))
    masks = parts.group_masks
    counts = _counts(parts)
    out: dict[str, dict[str, Interval | tuple]] = {}
    for key in PRIMARY:
        n = int(masks[key].sum())
        jk = jack[key][masks[key]]
        out[key] = {
            "used": _interval(key, point[key], parts, jack, counts, weights, {}, rule),
            "percentile": percentile_ci(draws[key], n, rule),
            "bca": bca_interval(point[key], draws[key], jk),
            "jackknife_t": t_ci(point[key], jk, n, rule.min_groups),
        }
    return out


def _covers(ci: Interval | tuple, truth: float) -> bool:
    low, high = (ci.low, ci.high) if isinstance(ci, Interval) else ci
    return low is not None and high is not None and low - 1e-12 <= truth <= high + 1e-12


def coverage(settings: SelftestSettings) -> list[dict[str, Any]]:
    """Per judge, figure and number of mixed clusters: the share of audits whose CI covers
    the truth, for each interval of INTERVALS. Every audit gets every interval (a minimum of
    2 clusters): the table is what chooses `analysis.min_ci_groups`."""
    rule = settings.ci_rule(2)
    rng = np.random.default_rng(settings.seed)
    truth = {name: true_values(j, settings.k, settings.truth_tasks, rng)
             for name, j in settings.judges.items()}  # fmt: skip
    rows = []
    for n in settings.clusters:
        hits = {(name, key): dict.fromkeys(INTERVALS, 0)
                for name in settings.judges for key in PRIMARY}  # fmt: skip
        for a in range(settings.audits):
            passed = simulate_audit(n, settings.k, rng)
            weights = resample_weights(passed.shape[0], settings.bootstrap, settings.seed + a)
            for name, judge in settings.judges.items():
                _, _, parts = figures_of(passed, judge.score(passed.astype(float), rng))
                for key, cis in audit_intervals(parts, weights, rule).items():
                    for method, ci in cis.items():
                        hits[(name, key)][method] += int(_covers(ci, truth[name][key]))
        for (name, key), by_method in hits.items():
            rows.append({"judge": name, "figure": key, "clusters": n, "true": truth[name][key],
                         "audits": settings.audits,
                         **{f"coverage_{m}": by_method[m] / settings.audits
                            for m in INTERVALS}})  # fmt: skip
    return rows


def family_wise_error(
    settings: SelftestSettings, n_mixed: int, n_judges: int = 3
) -> dict[str, Any]:
    """`n_judges` judges planted alike, every pair compared on strict pairwise accuracy with
    Holm's correction, on audits of `n_mixed` mixed tasks: the share of audits declaring any
    pair different."""
    rng = np.random.default_rng(settings.seed + 1)
    judge = settings.judges.get("coarse", Planted())
    knobs = PowerSettings()
    rule = settings.ci_rule(settings.min_ci_groups)
    any_sep = tested = 0
    for _ in range(settings.audits):
        passed = simulate_audit(n_mixed, settings.k, rng)
        ends = []
        for _ in range(n_judges):
            _, _, parts = figures_of(passed, judge.score(passed.astype(float), rng))
            ends.append(_endpoint(parts, "pairwise_accuracy_strict"))
        results = [compare(ends[i], ends[j], knobs, rule)
                   for i in range(n_judges) for j in range(i + 1, n_judges)]  # fmt: skip
        ps = [r["p_value"] for r in results if r["p_value"] is not None]
        if not ps:
            continue
        tested += 1
        any_sep += int(any(p < knobs.alpha for p in holm(ps)))
    return {"clusters": n_mixed, "judges": n_judges, "audits_tested": tested,
            "family_wise_error": any_sep / tested if tested else None}  # fmt: skip


def empirical_power(settings: SelftestSettings, pilot_tasks: int = 40) -> dict[str, Any]:
    """Two judges (`sharp`, `coarse`): the tasks the power analysis asks for their true gap
    in strict pairwise accuracy, from one pilot audit's paired SD, then the share of audits of
    that size whose paired test separates them (one comparison, alpha 0.05)."""
    rng = np.random.default_rng(settings.seed + 2)
    a, b = settings.judges["sharp"], settings.judges["coarse"]
    key = "pairwise_accuracy_strict"
    rule = settings.ci_rule(settings.min_ci_groups)
    gap = (true_values(a, settings.k, settings.truth_tasks, rng)[key]
           - true_values(b, settings.k, settings.truth_tasks, rng)[key])  # fmt: skip

    def pair(n: int) -> dict[str, Any]:
        passed = simulate_groups(n, settings.k, rng)
        ea = _endpoint(figures_of(passed, a.score(passed.astype(float), rng))[2], key)
        eb = _endpoint(figures_of(passed, b.score(passed.astype(float), rng))[2], key)
        return compare(ea, eb, PowerSettings(margin=abs(gap)), rule)

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
            family_wise_error(settings, n) for n in settings.clusters if n >= settings.min_ci_groups
        ],
        "power": empirical_power(settings),
        "settings": {
            "audits": settings.audits,
            "clusters": list(settings.clusters),
            "k": settings.k,
            "bootstrap": settings.bootstrap,
            "truth_tasks": settings.truth_tasks,
            "seed": settings.seed,
        },  # fmt: skip
    }
