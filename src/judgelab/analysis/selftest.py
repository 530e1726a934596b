"""A self-test with planted judges: do judgelab's own statistics hold their stated level?

Simulated audits go through the real analysis code (fidelity.task_parts for every figure,
fidelity.figure_interval for the CI each figure gets in metrics.json, power.compare and
power.holm for the paired comparisons and the tasks-needed figure); only the judges and the
groups are simulated.

- A group is one task with `k` candidates (`group_sizes`: 4 and 8); each passes with the
  task's own pass rate (drawn from Beta(1, 1)), so some tasks are mixed and some are not, as
  in a real audit.
- A planted judge is `Planted(signal, noise, levels, position, leniency, skill_sd,
  unscored)`: in task t the judge's signal is s_t = signal + skill_sd * N(0, 1) (per-task
  skill: a judge good on some tasks, blind or inverted on others), and a candidate's score is
  clip(0.5 + leniency + s_t * (passed - 0.5) + position * (slot centred) + noise * N(0, 1),
  0, 1), rounded to `levels` steps (coarse steps make ties, as small LLM judges do); with
  probability `unscored` the candidate is left unscored (NaN), and goes to `task_parts` as
  `unscored=` so the signal figures count it, as truth_metrics does. Slots are the
  candidates' order in the group; a position bias therefore acts as extra noise here.
  `blind` (signal 0, noise > 0) is blind to the truth but not flat: its signal fidelity,
  advantage fidelity and top-1 over chance are 0 by symmetry, and that 0 is its true value.
- The true value of a figure for a planted judge is its value over `truth_tasks` simulated
  tasks (a ratio estimator converges to it); a paired difference's true value is the
  difference of the two true values. An audit holding `n` clusters is a fresh draw of tasks
  until `n` of them are mixed (pass and fail present; the other tasks are drawn along and
  resampled too, as in an analysis).

Checks (`run_selftest`), each over `audits` simulated audits, for each group size:
- coverage: the share of audits in which each measured figure's 95 % CI (FIGURES) covers its
  true value, per number of mixed clusters, for the interval judgelab uses
  (`fidelity.figure_interval`) and the alternatives it was chosen over: the percentile
  bootstrap, BCa and the jackknife t;
- paired differences: for every pair of planted judges, the share of audits whose
  `power.compare` interval (difference_ci_low/high) covers the true difference, on signal
  fidelity (compared on the tasks either judge has a weight in) and strict pairwise accuracy;
- family-wise error: judges planted with identical parameters, compared pairwise with Holm's
  correction on each compared figure: the share of audits that declare any pair different;
- order: a ladder of judges alike but for their signal, in one big audit: their ranking on
  signal fidelity and whether Holm separates each from the next;
- power: for two judges whose true strict pairwise accuracy differs by d, the tasks the power
  analysis says are needed for d (from a pilot audit's paired SD), then the share of audits
  of that size that separate the pair.

`judgelab selftest` prints the tables; tests/unit/test_selftest.py runs a small version;
docs/SELFTEST.md records the full one with its CPU and date.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from judgelab.analysis.fidelity import NOISE_COUNTED, figure_interval, task_parts
from judgelab.analysis.power import compare, holm, paired_t
from judgelab.analysis.stats import (
    CI_LEVEL,
    CIRule,
    Interval,
    percentile_ci,
    resample_weights,
    t_ci,
)
from judgelab.config import AnalysisSettings, PowerSettings

# The primary endpoints (signal fidelity first, the default) and the within-group false praise,
# the figure GRPO users read beside them.
PRIMARY = (
    "signal_fidelity",
    "pairwise_accuracy_strict",
    "advantage_fidelity",
    "top1_over_chance",
    "false_praise_within_group",
)
# Beside signal fidelity: the right-pair rate (its interval is the one the inverted, tied and
# unscored pair rates get) and the noise group rate (Wilson over the tasks the tests do not split).
FIGURES = (*PRIMARY, "right_pair_rate", "noise_group_rate")
# The figures whose paired difference is measured: the default primary and the former one.
COMPARED = ("signal_fidelity", "pairwise_accuracy_strict")
INTERVALS = ("used", "percentile", "bca", "jackknife_t")
# 0 by symmetry for a judge without signal (the slot and the leniency do not depend on truth).
ZERO_WITHOUT_SIGNAL = ("signal_fidelity", "advantage_fidelity", "top1_over_chance")


@dataclass(frozen=True)
class Planted:
    """A simulated judge with known behaviour (module docstring)."""

    signal: float = 0.3
    noise: float = 0.2
    levels: int = 10
    position: float = 0.0
    leniency: float = 0.0
    skill_sd: float = 0.0  # per-task spread of the signal
    unscored: float = 0.0  # probability that a candidate is left unscored

    @property
    def blind(self) -> bool:
        """No signal in any task: the ZERO_WITHOUT_SIGNAL figures are 0."""
        return self.signal == 0.0 and self.skill_sd == 0.0

    def score(self, passed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """(tasks, k) scores for (tasks, k) verdicts (1/0); NaN where left unscored."""
        k = passed.shape[-1]
        slot = (np.arange(k) - (k - 1) / 2) / max((k - 1) / 2, 1)
        signal = self.signal + self.skill_sd * rng.standard_normal((*passed.shape[:-1], 1))
        raw = (0.5 + self.leniency + signal * (passed - 0.5) + self.position * slot
               + self.noise * rng.standard_normal(passed.shape))  # fmt: skip
        scores = np.round(np.clip(raw, 0.0, 1.0) * self.levels) / self.levels
        return np.where(rng.random(passed.shape) < self.unscored, np.nan, scores)


FAMILY = {
    "sharp": Planted(signal=0.5, noise=0.2, levels=20),
    "coarse": Planted(signal=0.3, noise=0.2, levels=3),
    "biased": Planted(signal=0.3, noise=0.2, levels=10, position=0.2, leniency=0.3),
    "uneven": Planted(signal=0.3, noise=0.2, levels=10, skill_sd=0.3),
    "patchy": Planted(signal=0.4, noise=0.2, levels=5, skill_sd=0.2, unscored=0.2),
    "blind": Planted(signal=0.0, noise=0.2, levels=10),
}
# Alike but for the signal, listed best first: the order check ranks them on signal fidelity.
LADDER = {
    f"signal {s}": Planted(signal=s, noise=0.2, levels=5, skill_sd=0.2, unscored=0.1)
    for s in (0.6, 0.4, 0.2, 0.0)
}


@dataclass
class SelftestSettings:
    audits: int = 500
    clusters: tuple[int, ...] = (5, 8, 10, 15, 20, 40)  # mixed tasks per simulated audit
    group_sizes: tuple[int, ...] = (4, 8)  # candidates per task (k)
    bootstrap: int = 500
    truth_tasks: int = 20000
    seed: int = 0
    judges: dict[str, Planted] = field(default_factory=lambda: dict(FAMILY))
    alike: str = "patchy"  # the judge planted several times for the family-wise error
    order_clusters: int = 300  # mixed tasks in the order check's audit
    min_ci_groups: int = AnalysisSettings.model_fields["min_ci_groups"].default

    def ci_rule(self, min_ci_groups: int) -> CIRule:
        """The audits' CI rule from `min_ci_groups` clusters (each audit reseeds its resamples)."""
        return CIRule(min_ci_groups, self.bootstrap, self.seed, CI_LEVEL)


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
    """Point figures (and bootstrap draws with `weights`) from the real per-task parts; a NaN
    score is an unscored candidate (truth_metrics' `unscored=`)."""
    n_tasks, k = passed.shape
    task_idx = np.repeat(np.arange(n_tasks), k)
    score, verdict = scores.ravel(), passed.ravel()
    ok = np.isfinite(score)
    parts = task_parts(task_idx[ok], score[ok], verdict[ok], n_tasks, 0.8,
                       unscored=(task_idx[~ok], verdict[~ok]))  # fmt: skip
    point = {key: float(v[0]) for key, v in parts.figures(np.ones((1, n_tasks))).items()}
    draws = parts.figures(weights) if weights is not None else None
    return point, draws, parts


def judge_parts(judge: Planted, passed: np.ndarray, rng: np.random.Generator) -> Any:
    """The per-task parts of `judge` scoring the candidates of `passed`."""
    return figures_of(passed, judge.score(passed.astype(float), rng))[2]


def true_values(
    judge: Planted, k: int, n: int, rng: np.random.Generator, chunk: int = 500
) -> dict[str, float]:
    """Each measured figure over `n` simulated tasks, drawn in chunks (every figure is a ratio
    of per-task sums, so the chunks' sums add up); a blind judge's ZERO_WITHOUT_SIGNAL
    figures are 0 exactly."""
    num = dict.fromkeys(FIGURES, 0.0)
    den = dict.fromkeys(FIGURES, 0.0)
    for start in range(0, n, chunk):
        parts = judge_parts(judge, simulate_groups(min(chunk, n - start), k, rng), rng)
        for key in FIGURES:
            c, m = _endpoint(parts, key)
            num[key] += float(c.sum())
            den[key] += float(m.sum())
    known = dict.fromkeys(ZERO_WITHOUT_SIGNAL, 0.0) if judge.blind else {}
    return {key: known.get(key, num[key] / den[key]) for key in FIGURES}


def _endpoint(parts: Any, key: str) -> tuple[np.ndarray, np.ndarray]:
    """(numerator, denominator) per task of a measured figure (fidelity.task_endpoint's)."""
    pairs, sig = parts.n_pass * parts.n_fail, parts.signal
    return {"signal_fidelity": (sig.fid_num, sig.fid_den),
            "pairwise_accuracy_strict": (parts.strict, pairs),
            "advantage_fidelity": (parts.adv_corr, parts.top_den),
            "top1_over_chance": (parts.top_num - parts.top_chance, parts.top_den),
            "false_praise_within_group": (parts.fail_at_pass, parts.n_fail_mixed),
            "right_pair_rate": (sig.right, sig.split),
            "noise_group_rate": (sig.noisy, sig.unsplit)}[key]  # fmt: skip


def bca_interval(point: float, draws: np.ndarray, jackknife: np.ndarray,
                 level: float = 0.95) -> tuple[float, float]:  # fmt: skip
    """Efron's BCa interval (an alternative measured here): bias correction z0 from the share
    of draws below the point (ties count half), acceleration from the jackknife's skew."""
    d = draws[np.isfinite(draws)]
    if not d.size or not np.isfinite(point):
        return (np.nan, np.nan)
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
    """The unit counts truth_metrics passes to fidelity.figure_interval (Wilson's units)."""
    return {"n_pairs": float((parts.n_pass * parts.n_fail).sum()),
            "n_top1_groups": float(parts.top_den.sum()),
            "n_failing_mixed": float(parts.n_fail_mixed.sum()),
            "n_failing": float(parts.n_fail.sum()),
            "n_pass_fail_pairs": float(parts.n_pass.sum() * parts.n_fail.sum()),
            "n_unsplit_groups": float(parts.signal.unsplit.sum()),
            "n_signal_pairs": float(parts.signal.pairs.sum())}  # fmt: skip


def audit_intervals(
    parts: Any, weights: np.ndarray, rule: CIRule
) -> dict[str, dict[str, Interval | tuple]]:
    """Per measured figure: the interval judgelab uses and the alternatives, for one audit."""
    n_t = parts.n_pass.size
    point = {key: float(v[0]) for key, v in parts.figures(np.ones((1, n_t))).items()}
    draws = parts.figures(weights)
    jack = parts.figures(np.ones((n_t, n_t)) - np.eye(n_t))
    masks = parts.group_masks
    counts = _counts(parts)
    out: dict[str, dict[str, Interval | tuple]] = {}
    for key in FIGURES:
        n = int(masks[key].sum())
        jk = jack[key][masks[key]]
        value = point[key] if np.isfinite(point[key]) else None
        reasons = {} if value is not None else {key: "undefined"}
        out[key] = {
            "used": figure_interval(key, value, parts, jack, counts, weights, reasons, rule),
            "percentile": percentile_ci(draws[key], n, rule),
            "bca": bca_interval(point[key], draws[key], jk),
            "jackknife_t": t_ci(value, jk, n, rule.min_ci_groups),
        }
    return out


def _covers(ci: Interval | tuple, truth: float) -> bool:
    low, high = (ci.low, ci.high) if isinstance(ci, Interval) else ci
    return low is not None and high is not None and low - 1e-12 <= truth <= high + 1e-12


def _paired(a: Any, b: Any, key: str, rule: CIRule) -> tuple[Interval, float | None]:
    """The difference interval and p-value power.compare reports for two judges' parts on
    `key` (power.paired_t, as power_analysis calls it; without compare's power figures)."""
    got = paired_t(_endpoint(a, key), _endpoint(b, key), rule, either=key in NOISE_COUNTED)
    return got[3], got[4]


def coverage(settings: SelftestSettings, k: int) -> dict[str, list[dict[str, Any]]]:
    """At group size `k`, per number of mixed clusters: for each judge and figure the share
    of audits whose CI covers the truth, for each interval of INTERVALS (`figures`); for each
    pair of judges and COMPARED figure, the share whose paired-difference interval covers the
    true difference (`differences`). Every audit gets every interval (a minimum of 2
    clusters): the table is what chooses `analysis.min_ci_groups`."""
    rule = settings.ci_rule(2)
    rng = np.random.default_rng([settings.seed, k])
    truth = {name: true_values(j, k, settings.truth_tasks, rng)
             for name, j in settings.judges.items()}  # fmt: skip
    pairs = list(itertools.combinations(settings.judges, 2))
    figure_rows, diff_rows = [], []
    for n in settings.clusters:
        hits = {(name, key): dict.fromkeys(INTERVALS, 0)
                for name in settings.judges for key in FIGURES}  # fmt: skip
        diff_hits = dict.fromkeys(itertools.product(pairs, COMPARED), 0)
        diff_defined = dict.fromkeys(itertools.product(pairs, COMPARED), 0)
        for a in range(settings.audits):
            passed = simulate_audit(n, k, rng)
            weights = resample_weights(passed.shape[0], settings.bootstrap, settings.seed + a)
            parts = {name: judge_parts(j, passed, rng) for name, j in settings.judges.items()}
            for name, p in parts.items():
                for key, cis in audit_intervals(p, weights, rule).items():
                    for method, ci in cis.items():
                        hits[(name, key)][method] += int(_covers(ci, truth[name][key]))
            for (x, y), key in diff_hits:
                ci, _ = _paired(parts[x], parts[y], key, rule)
                diff_defined[((x, y), key)] += int(ci.valid)
                diff_hits[((x, y), key)] += int(_covers(ci, truth[x][key] - truth[y][key]))
        for (name, key), by_method in hits.items():
            figure_rows.append({"k": k, "judge": name, "figure": key, "clusters": n,
                                "true": truth[name][key], "audits": settings.audits,
                                **{f"coverage_{m}": by_method[m] / settings.audits
                                   for m in INTERVALS}})  # fmt: skip
        for ((x, y), key), covered in diff_hits.items():
            diff_rows.append({"k": k, "pair": f"{x} - {y}", "figure": key, "clusters": n,
                              "true": truth[x][key] - truth[y][key], "audits": settings.audits,
                              "with_interval": diff_defined[((x, y), key)] / settings.audits,
                              "coverage": covered / settings.audits})  # fmt: skip
    return {"figures": figure_rows, "differences": diff_rows}


def family_wise_error(
    settings: SelftestSettings, n_mixed: int, k: int, n_judges: int = 3
) -> list[dict[str, Any]]:
    """`n_judges` judges planted alike (`settings.alike`), every pair compared on each
    COMPARED figure with Holm's correction, on audits of `n_mixed` mixed tasks with `k`
    candidates each: per figure, the share of audits declaring any pair different."""
    rng = np.random.default_rng([settings.seed, k, n_mixed, 1])
    judge = settings.judges[settings.alike]
    knobs = PowerSettings()
    rule = settings.ci_rule(settings.min_ci_groups)
    any_sep, tested = dict.fromkeys(COMPARED, 0), dict.fromkeys(COMPARED, 0)
    for _ in range(settings.audits):
        passed = simulate_audit(n_mixed, k, rng)
        parts = [judge_parts(judge, passed, rng) for _ in range(n_judges)]
        for key in COMPARED:
            ps = [p for a, b in itertools.combinations(parts, 2)
                  if (p := _paired(a, b, key, rule)[1]) is not None]  # fmt: skip
            if not ps:
                continue
            tested[key] += 1
            any_sep[key] += int(any(p < knobs.alpha for p in holm(ps)))
    return [{"k": k, "figure": key, "clusters": n_mixed, "judges": n_judges,
             "audits_tested": tested[key],
             "family_wise_error": any_sep[key] / tested[key] if tested[key] else None}
            for key in COMPARED]  # fmt: skip


def planted_order(settings: SelftestSettings, k: int) -> dict[str, Any]:
    """The LADDER judges (best first) in one audit of `settings.order_clusters` mixed tasks
    with `k` candidates each: their ranking on signal fidelity, and whether every judge is
    Holm-separated from the next one down (power_analysis' comparison)."""
    rng = np.random.default_rng([settings.seed, k, 3])
    passed = simulate_audit(settings.order_clusters, k, rng)
    parts = {name: judge_parts(j, passed, rng) for name, j in LADDER.items()}
    key = "signal_fidelity"
    value = {name: float(_endpoint(p, key)[0].sum() / _endpoint(p, key)[1].sum())
             for name, p in parts.items()}  # fmt: skip
    rule = settings.ci_rule(settings.min_ci_groups)
    names = list(LADDER)
    every = list(itertools.combinations(names, 2))
    p_values = [_paired(parts[a], parts[b], key, rule)[1] for a, b in every]
    adjusted = dict(zip(every, holm([1.0 if p is None else p for p in p_values]), strict=True))
    return {"k": k, "clusters": settings.order_clusters, "planted": names,
            "ranked": sorted(names, key=lambda n: -value[n]), "signal_fidelity": value,
            "difference_to_next": [value[a] - value[b] for a, b in itertools.pairwise(names)],
            "separated_from_next": [adjusted[p] < PowerSettings().alpha
                                    for p in itertools.pairwise(names)]}  # fmt: skip


def empirical_power(settings: SelftestSettings, pilot_tasks: int = 40) -> dict[str, Any]:
    """Two judges (`sharp`, `coarse`), k the first group size: the tasks the power analysis
    asks for their true gap in strict pairwise accuracy, from one pilot audit's paired SD,
    then the share of audits of that size whose paired test separates them (one comparison,
    alpha 0.05)."""
    rng = np.random.default_rng(settings.seed + 2)
    a, b = settings.judges["sharp"], settings.judges["coarse"]
    k = settings.group_sizes[0]
    key = "pairwise_accuracy_strict"
    rule = settings.ci_rule(settings.min_ci_groups)
    gap = (true_values(a, k, settings.truth_tasks, rng)[key]
           - true_values(b, k, settings.truth_tasks, rng)[key])  # fmt: skip

    def pair(n: int) -> dict[str, Any]:
        passed = simulate_groups(n, k, rng)
        pa, pb = judge_parts(a, passed, rng), judge_parts(b, passed, rng)
        return compare(_endpoint(pa, key), _endpoint(pb, key), PowerSettings(), rule,
                       margin=abs(gap))

    needed = pair(pilot_tasks)["groups_needed_margin"]
    if needed is None:
        return {"k": k, "true_gap": gap, "tasks_needed": None, "power": None}
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
    return {"k": k, "true_gap": gap, "tasks_needed": needed, "power": hits / runs}


def run_selftest(settings: SelftestSettings) -> dict[str, Any]:
    by_k = {k: coverage(settings, k) for k in settings.group_sizes}
    return {
        "coverage": [row for k in settings.group_sizes for row in by_k[k]["figures"]],
        "differences": [row for k in settings.group_sizes for row in by_k[k]["differences"]],
        "family_wise": [
            row
            for k in settings.group_sizes
            for n in settings.clusters
            if n >= settings.min_ci_groups
            for row in family_wise_error(settings, n, k)
        ],
        "order": [planted_order(settings, k) for k in settings.group_sizes],
        "power": empirical_power(settings),
        "settings": {
            "audits": settings.audits,
            "clusters": list(settings.clusters),
            "group_sizes": list(settings.group_sizes),
            "bootstrap": settings.bootstrap,
            "truth_tasks": settings.truth_tasks,
            "seed": settings.seed,
            "alike": settings.alike,
            "order_clusters": settings.order_clusters,
            "min_ci_groups": settings.min_ci_groups,
            "judges": {name: asdict(j) for name, j in settings.judges.items()},
            "ladder": {name: asdict(j) for name, j in LADDER.items()},
        },  # fmt: skip
    }
