"""Each evaluator against execution truth (`truth.Truth`): does it rank passing code above
failing code, and does it praise code that fails its tests?

Contract:
- An evaluator's score for a candidate is the mean of its *scored* repeats; a candidate the
  evaluator never scored is left out and counted (`n_candidates_unscored`), never scored as 0.
- Metrics, over candidates with both truth and a score:
  * `roc_auc`: scikit-learn's ROC-AUC of score vs passed (null when only one class is present).
  * `pairwise_accuracy_strict` (a primary endpoint): for each task, every (passing, failing)
    pair: 1 if the passing one scores higher, 0 otherwise (a tie teaches GRPO nothing, so it
    is not right); the mean over all pairs of all tasks. `tied_pair_share` (the tie rate)
    goes beside it. `pairwise_accuracy` is the secondary figure that counts a tie as 1/2.
  * `top1_accuracy`: over mixed tasks (a passing and a failing candidate), whether the
    top-scored candidate passes; a tie at the top shares the credit (share of tied that pass).
    `top1_chance` is what a judge that guesses gets: the mean passing share of those tasks;
    `top1_over_chance` (a primary endpoint) is the difference.
  * Advantage fidelity, on mixed tasks: a judge's GRPO advantages in a task are
    a = (score - mean) / std (population std over the task's scored candidates with truth, as
    ART computes them per group; all 0 when every score is equal: `judgelab.advantage`, the
    one definition); the tests' are the same of passed (1/0). `advantage_fidelity` (a
    primary endpoint) is the mean over mixed tasks of mean(a_judge * a_tests), their
    within-task correlation (= the judge's advantage gap / the tests' gap): 1 when the judge
    splits the task as the tests do, 0 when it gives no signal, negative when it pushes
    failing code up. `advantage_gap` and
    `advantage_gap_tests`: mean advantage of passing minus failing candidates, the judge's
    and the tests'. `advantage_order_rate`: share of mixed tasks in which every passing
    candidate's advantage is above every failing one's. `zero_advantage_mixed_rate`: share of
    mixed tasks with one score for all (`n_zero_advantage_mixed`): no signal, never chance.
  * The signal figures (`SIGNAL`; `signal_fidelity`, the default primary, docs/METRICS.md)
    take the advantages of the `convention` the trainer uses (`analysis.advantage`: `std`,
    `centred` or `batch`, judgelab.advantage): c_t = mean(a_judge * a_tests) over every
    candidate of task t with truth, d_t = mean(a_tests^2) where the tests split t (1 under
    `std`) and mean(a_judge^2) where they do not (the noise charge: under `std` 1 for any
    uneven scoring, under `centred` its size). `signal_parts` gives the per-task parts
    (analysis/split_share.py splits signal fidelity into alignment and noise).
  * `false_praise_within_group`: share of failing candidates of mixed tasks scored at or above
    some passing candidate of their task (the honest false praise of a relative judge).
  * `false_praise_absolute`: share of failing candidates scored >= `praise_threshold` (absolute
    scale: labelled so, never used to compare protocols whose scales differ).
  * `mean_score_passing`, `mean_score_failing` and `score_gap` (their difference).
  * `roc_auc_standardised`: ROC-AUC on within-task standardised scores,
    z = (score - task mean) / task std (population std, over the evaluator's scored
    candidates of the task; 0 when they are all equal; rounded to `Z_DECIMALS` so that equal
    standings in two tasks tie): GRPO's advantage.
    `false_praise_standardised`: share of failing candidates of mixed tasks with z > 0
    (training would push them up); all-failing tasks are left out, since some candidate is
    always above their mean. Adding a constant to one task's scores cannot move them.
- Scales. A group judge (RULER) scores candidates only relative to the others in its group, so
  `WITHIN_GROUP` figures (pairwise, top-1, tied pairs) are its headline; `ABSOLUTE_SCALE`
  figures (pooled ROC-AUC, the praise threshold, mean scores) compare scores across groups the
  judge never saw together; `STANDARDISED` ones remove each group's offset and spread.
- Every headline figure has a 95% percentile CI from a cluster bootstrap that resamples TASKS
  with replacement. The resample matrix is drawn once per analysis from `seed` over the sorted
  tasks that have truth, and every evaluator uses the same matrix (a paired bootstrap), so
  results are deterministic for a seed and do not depend on which other evaluators are present.
  The minimum-clusters rule (`stats.too_few_groups`) counts, per figure, the tasks that
  contribute to it (`<figure>_n_groups`: mixed pass/fail tasks for the within-task figures,
  tasks with a failing candidate for false praise, ...); resamples in which a figure is
  undefined are counted (`<figure>_undefined_resamples`). See `stats.Interval.fields`.
- A figure that cannot be computed is null and `reasons[figure]` says why. Pure functions over
  polars DataFrames; nothing here raises on an empty or all-unscored evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import polars as pl
from sklearn.metrics import roc_auc_score

from judgelab.advantage import Convention, group_advantages, grouped_advantages, has_spread
from judgelab.analysis.pooled_auc import PooledPairs
from judgelab.analysis.stats import CIRule, Interval, cluster_ci, no_interval
from judgelab.analysis.truth import Truth

# Judges that score a task's candidates together, relative to one another (evaluators/ruler.py).
WITHIN_GROUP = (
    "pairwise_accuracy_strict",
    "pairwise_accuracy",
    "top1_accuracy",
    "top1_chance",
    "top1_over_chance",
    "tied_pair_share",
    "advantage_fidelity",
    "advantage_order_rate",
    "advantage_gap",
    "advantage_gap_tests",
    "zero_advantage_mixed_rate",
    "false_praise_within_group",
    "false_praise_standardised",
)
# The GRPO signal figures: over every task with truth, the unscored candidates included
# (GRPO gives them no push), each task weighing the same (module docstring).
SIGNAL = (
    "signal_fidelity",
    "right_pair_rate",
    "inverted_pair_rate",
    "tied_pair_rate",
    "unscored_pair_rate",
    "noise_group_rate",
)
# The GRPO-relevant figures `analysis.primary` may name: the ranking and the recommendation
# use the configured one (config.analysis's `primary` lists the same names).
PRIMARY = ("signal_fidelity", "pairwise_accuracy_strict", "advantage_fidelity", "top1_over_chance")
# Primaries whose denominator counts a judge's signal where the tests give none: two judges
# are compared over the tasks either one has a denominator in (power.compare).
NOISE_COUNTED = ("signal_fidelity",)
ABSOLUTE_SCALE = (
    "roc_auc",
    "false_praise_absolute",
    "mean_score_passing",
    "mean_score_failing",
    "score_gap",
)
STANDARDISED = ("roc_auc_standardised",)
HEADLINE = (*SIGNAL, *WITHIN_GROUP, *ABSOLUTE_SCALE, *STANDARDISED)
# Shares of units get Wilson's interval at the effective size (stats.cluster_ci): the count
# (a key of the truth metrics) of the units each is a share of.
SHARE_UNITS = {
    **dict.fromkeys(("pairwise_accuracy_strict", "pairwise_accuracy", "tied_pair_share"),
                    "n_pairs"),
    **dict.fromkeys(("top1_accuracy", "top1_chance", "advantage_order_rate",
                     "zero_advantage_mixed_rate"), "n_top1_groups"),
    **dict.fromkeys(("false_praise_within_group", "false_praise_standardised"),
                    "n_failing_mixed"),
    "false_praise_absolute": "n_failing",
    **dict.fromkeys(("roc_auc", "roc_auc_standardised"), "n_pass_fail_pairs"),
    "noise_group_rate": "n_unsplit_groups",
    # task-weighted shares of pairs: Wilson at the effective size over every pair (the
    # planted-judge self-test found the bootstrap-t short near 1, docs/SELFTEST.md)
    **dict.fromkeys(SIGNAL[1:5], "n_signal_pairs"),
}  # fmt: skip
# The range of the figures the studentized bootstrap draws (an infinite end is clipped to it).
RATIO_BOUNDS = {
    "signal_fidelity": (-1.0, 1.0),
    "advantage_fidelity": (-1.0, 1.0),
    "top1_over_chance": (-1.0, 1.0),
    "mean_score_passing": (0.0, 1.0),
    "mean_score_failing": (0.0, 1.0),
}
Z_DECIMALS = 9  # within-task z-scores are compared across tasks at this precision
_NO_UNSCORED = (np.zeros(0, int), np.zeros(0, bool))  # no candidate left unscored


def candidate_scores(scores: pl.DataFrame, evaluator: str) -> pl.DataFrame:
    """task_id, candidate_id, score (mean of scored repeats; null if none), n_scored_repeats."""
    rows = scores.filter(pl.col("evaluator") == evaluator)
    if not rows.height:
        return pl.DataFrame(
            schema={
                "task_id": pl.String,
                "candidate_id": pl.String,
                "score": pl.Float64,
                "n_scored_repeats": pl.UInt32,
            }
        )
    scored = pl.col("status") == "scored"
    return (
        rows.group_by("task_id", "candidate_id")
        .agg(
            pl.col("score").filter(scored).mean().cast(pl.Float64).alias("score"),
            scored.sum().cast(pl.UInt32).alias("n_scored_repeats"),
        )
        .sort("task_id", "candidate_id")
    )


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


@dataclass(frozen=True)
class _TaskParts:
    """Per-task sums from which every figure is a ratio; a resample just reweights tasks.
    `mixed` marks the tasks with both a passing and a failing scored candidate; the
    per-mixed-task arrays are 0 elsewhere."""

    n_pass: np.ndarray  # (T,)
    n_fail: np.ndarray
    pooled: PooledPairs  # pair credit between tasks: the pooled ROC-AUC's numerator
    strict: np.ndarray  # (T,): (passing, failing) pairs of task t the passing one wins outright
    tied: np.ndarray  # (T,): tied (passing, failing) pairs within task t
    top_num: np.ndarray
    top_den: np.ndarray  # 1 for a mixed task
    top_chance: np.ndarray  # passing share of a mixed task: top-1 of a judge that guesses
    adv_corr: np.ndarray  # within-task correlation of the judge's and the tests' advantages
    adv_ordered: np.ndarray  # 1: every passing advantage above every failing one
    adv_gap: np.ndarray  # mean advantage of passing minus failing (the judge's)
    adv_gap_tests: np.ndarray  # the same with the tests' advantages
    flat_mixed: np.ndarray  # 1: a mixed task whose candidates all got one score
    n_fail_mixed: np.ndarray  # failing candidates of a mixed task
    fail_at_pass: np.ndarray  # of them, scored at or above some passing candidate of the task
    praised_fail: np.ndarray
    sum_pass: np.ndarray
    sum_fail: np.ndarray
    signal: _Signal

    def figures(self, w: np.ndarray) -> dict[str, np.ndarray]:
        """Every figure for each row of task weights `w` (B, T)."""
        n_pass, n_fail = w @ self.n_pass, w @ self.n_fail
        within = self.strict + 0.5 * self.tied  # pair credit within each task
        n_within = w @ (self.n_pass * self.n_fail)
        n_mixed = w @ self.top_den
        mean_pass = _ratio(w @ self.sum_pass, n_pass)
        mean_fail = _ratio(w @ self.sum_fail, n_fail)
        top1 = _ratio(w @ self.top_num, n_mixed)
        chance = _ratio(w @ self.top_chance, n_mixed)
        return {
            "roc_auc": _ratio(self.pooled.numerator(w), n_pass * n_fail),
            "pairwise_accuracy": _ratio(w @ within, n_within),
            "pairwise_accuracy_strict": _ratio(w @ self.strict, n_within),
            "top1_accuracy": top1,
            "top1_chance": chance,
            "top1_over_chance": top1 - chance,
            "tied_pair_share": _ratio(w @ self.tied, n_within),
            "advantage_fidelity": _ratio(w @ self.adv_corr, n_mixed),
            "advantage_order_rate": _ratio(w @ self.adv_ordered, n_mixed),
            "advantage_gap": _ratio(w @ self.adv_gap, n_mixed),
            "advantage_gap_tests": _ratio(w @ self.adv_gap_tests, n_mixed),
            "zero_advantage_mixed_rate": _ratio(w @ self.flat_mixed, n_mixed),
            "false_praise_within_group": _ratio(w @ self.fail_at_pass, w @ self.n_fail_mixed),
            "false_praise_mixed": _ratio(
                w @ (self.praised_fail * self.top_den), w @ self.n_fail_mixed
            ),
            "false_praise_absolute": _ratio(w @ self.praised_fail, n_fail),
            "mean_score_passing": mean_pass,
            "mean_score_failing": mean_fail,
            "score_gap": mean_pass - mean_fail,
            **self.signal.figures(w),
        }

    @cached_property
    def group_masks(self) -> dict[str, np.ndarray]:
        """Which tasks contribute to each figure (their number is the n of the
        minimum-clusters rule; the jackknife leaves out each of them)."""
        mixed = (self.n_pass > 0) & (self.n_fail > 0)
        any_row = (self.n_pass + self.n_fail) > 0
        with_fail = self.n_fail > 0
        return {
            **dict.fromkeys(WITHIN_GROUP, mixed),
            **dict.fromkeys(("roc_auc", "score_gap", "roc_auc_standardised"), any_row),
            **dict.fromkeys(("false_praise_absolute", "mean_score_failing"), with_fail),
            "mean_score_passing": self.n_pass > 0,
            **self.signal.group_masks,
        }

    def group_counts(self) -> dict[str, int]:
        """How many tasks contribute to each figure (the n of the minimum-clusters rule)."""
        return {name: int(mask.sum()) for name, mask in self.group_masks.items()}

    @cached_property
    def ratio_terms(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """(numerator, denominator) per task of the figures `stats.bootstrap_t_ci` takes:
        ratios of per-task sums that are not shares of units."""
        return {
            "advantage_fidelity": (self.adv_corr, self.top_den),
            "top1_over_chance": (self.top_num - self.top_chance, self.top_den),
            "mean_score_passing": (self.sum_pass, self.n_pass),
            "mean_score_failing": (self.sum_fail, self.n_fail),
            **self.signal.ratio_terms,
        }


@dataclass(frozen=True)
class _Signal:
    """Per-task parts of the GRPO signal figures (`SIGNAL`), over every candidate of the task
    with truth: a candidate the judge left unscored is in the task with advantage 0 (GRPO
    cannot push it). `split` marks the tasks the tests split (a passing and a failing
    candidate, scored or not); `unsplit` the others with truth."""

    fid_num: np.ndarray  # mean over the task of a_judge * a_tests (0 where the tests split none)
    fid_den: np.ndarray  # the tests' push (mean a_tests^2) on a split task; the judge's on others
    split_push: np.ndarray  # mean a_tests^2 of a split task (1 under `std`), 0 elsewhere
    unsplit_push: np.ndarray  # mean a_judge^2 of an unsplit task (its noise), 0 elsewhere
    split: np.ndarray
    unsplit: np.ndarray
    right: np.ndarray  # shares of a split task's (passing, failing) pairs: passing above,
    inverted: np.ndarray  # failing above, both scored and equal, one or both unscored
    tied: np.ndarray
    unscored: np.ndarray
    noisy: np.ndarray  # 1: an unsplit task whose candidates the judge does not score alike
    pairs: np.ndarray  # a split task's (passing, failing) pairs, scored or not

    def figures(self, w: np.ndarray) -> dict[str, np.ndarray]:
        n_split = w @ self.split
        return {
            "signal_fidelity": _ratio(w @ self.fid_num, w @ self.fid_den),
            "right_pair_rate": _ratio(w @ self.right, n_split),
            "inverted_pair_rate": _ratio(w @ self.inverted, n_split),
            "tied_pair_rate": _ratio(w @ self.tied, n_split),
            "unscored_pair_rate": _ratio(w @ self.unscored, n_split),
            "noise_group_rate": _ratio(w @ self.noisy, w @ self.unsplit),
        }

    @property
    def group_masks(self) -> dict[str, np.ndarray]:
        return {
            "signal_fidelity": self.fid_den > 0,
            **dict.fromkeys(SIGNAL[1:5], self.split > 0),
            "noise_group_rate": self.unsplit > 0,
        }

    @property
    def ratio_terms(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return {"signal_fidelity": (self.fid_num, self.fid_den)}


def _signal_task(
    s: np.ndarray, y_all: np.ndarray, a: np.ndarray, b: np.ndarray, unit: bool
) -> dict[str, float]:
    """One task's `_Signal` parts: `s` its scored candidates' scores; `y_all`, `a` and `b` the
    verdicts and the judge's and the tests' advantages of all its candidates with truth, the
    scored ones first (an unscored one has a = 0); `unit`: the tests' push on a split task is
    1 by construction (the `std` convention)."""
    y = y_all[: s.size]
    n_pass = int(y_all.sum())
    n_fail = y_all.size - n_pass
    push = float(np.mean(a * a))
    if not (n_pass and n_fail):
        return {"fid_den": push, "unsplit_push": push, "unsplit": 1.0, "noisy": float(push > 0)}
    fail = np.sort(s[~y])
    below = np.searchsorted(fail, s[y], side="left")
    at_or_below = np.searchsorted(fail, s[y], side="right")
    pairs = float(n_pass * n_fail)
    right, tied = float(below.sum()), float((at_or_below - below).sum())
    scored_pairs = float(y.sum() * (~y).sum())
    tests_push = 1.0 if unit else float(np.mean(b * b))  # std: mean(b²) = 1 exactly
    return {
        "fid_num": float(np.mean(a * b)),
        "fid_den": tests_push,
        "split_push": tests_push,
        "split": 1.0,
        "right": right / pairs,
        "inverted": (scored_pairs - right - tied) / pairs,
        "tied": tied / pairs,
        "unscored": (pairs - scored_pairs) / pairs,
        "pairs": pairs,
    }


def _signal(
    task_idx: np.ndarray,
    score: np.ndarray,
    passed: np.ndarray,
    n_tasks: int,
    unscored_idx: np.ndarray,
    unscored_passed: np.ndarray,
    convention: Convention = "std",
) -> _Signal:
    """The signal parts of every task. Advantages follow `convention` (judgelab.advantage):
    the judge's over each task's scored candidates, the tests' over all its candidates with
    truth; under `batch` the batch is the whole audit (one scale for the judge's, one for the
    tests', held fixed across bootstrap resamples)."""
    rows = _rows_by_task(task_idx, n_tasks)
    # each task's unscored candidates, passing ones first (row order within each verdict)
    order = np.lexsort((~unscored_passed, unscored_idx))
    cuts = np.searchsorted(unscored_idx[order], np.arange(n_tasks + 1))
    n_scored = score.size
    a_scored = grouped_advantages(score, task_idx, convention)
    y_cat = np.concatenate([passed, unscored_passed]).astype(float)
    b_cat = grouped_advantages(y_cat, np.concatenate([task_idx, unscored_idx]), convention)
    parts = {k: np.zeros(n_tasks) for k in _Signal.__dataclass_fields__}
    for t in range(n_tasks):
        u = order[cuts[t] : cuts[t + 1]]
        if not rows[t].size and not u.size:
            continue
        got = _signal_task(
            score[rows[t]],
            np.concatenate([passed[rows[t]], unscored_passed[u]]),
            np.concatenate([a_scored[rows[t]], np.zeros(u.size)]),
            np.concatenate([b_cat[rows[t]], b_cat[n_scored + u]]),
            unit=convention == "std",
        )
        for key, value in got.items():
            parts[key][t] = value
    return _Signal(**parts)


def _mixed_task(s_t: np.ndarray, y_t: np.ndarray) -> dict[str, float]:
    """The within-task figures' parts of one mixed task (`s_t` its scores, `y_t` passed)."""
    top = s_t == s_t.max()
    a_judge, a_tests = np.asarray(group_advantages(s_t)), np.asarray(group_advantages(y_t * 1.0))
    return {
        "top_num": y_t[top].mean(),
        "top_den": 1.0,
        "top_chance": y_t.mean(),
        # mean(a_judge * a_tests) is their correlation = gap / gap_tests: 1 when the judge
        # splits passing from failing as the tests do, 0 for no signal, < 0 inverted
        "adv_corr": float(np.mean(a_judge * a_tests)),
        "adv_ordered": float(a_judge[y_t].min() > a_judge[~y_t].max()),
        "adv_gap": a_judge[y_t].mean() - a_judge[~y_t].mean(),
        "adv_gap_tests": a_tests[y_t].mean() - a_tests[~y_t].mean(),
        "flat_mixed": float(not has_spread(s_t)),
        "n_fail_mixed": float((~y_t).sum()),
        "fail_at_pass": float((s_t[~y_t] >= s_t[y_t].min()).sum()),
    }


def _rows_by_task(task_idx: np.ndarray, n_tasks: int) -> list[np.ndarray]:
    """Each task's row indices in row order (one sort, not a scan of every row per task)."""
    order = np.argsort(task_idx, kind="stable")
    cuts = np.searchsorted(task_idx[order], np.arange(n_tasks + 1))
    return [order[cuts[t] : cuts[t + 1]] for t in range(n_tasks)]


def task_parts(
    task_idx: np.ndarray,
    score: np.ndarray,
    passed: np.ndarray,
    n_tasks: int,
    threshold: float,
    praised: np.ndarray | None = None,
    unscored: tuple[np.ndarray, np.ndarray] | None = None,
    convention: Convention = "std",
) -> _TaskParts:
    """Per-task sums. A failing candidate counts as praised when its score >= threshold, or,
    when `praised` (one flag per row) is given, where that says so. `unscored`: the task
    index and verdict of each candidate with truth the judge left unscored (the signal
    figures count them; every other figure is over scored candidates). `convention`: the
    advantage convention of the signal figures (the others use `std`)."""
    sp, tp = score[passed], task_idx[passed]
    sf, tf = score[~passed], task_idx[~passed]
    praised_f = (sf >= threshold) if praised is None else np.asarray(praised, bool)[~passed]
    rows = _rows_by_task(task_idx, n_tasks)
    strict = np.zeros(n_tasks)
    tied_within = np.zeros(n_tasks)
    for u in np.unique(tf):
        s_u, y_u = score[rows[u]], passed[rows[u]]
        fail_u, pass_u = np.sort(s_u[~y_u]), s_u[y_u]
        below = np.searchsorted(fail_u, pass_u, side="left")
        strict[u] = below.sum()
        tied_within[u] = (np.searchsorted(fail_u, pass_u, side="right") - below).sum()
    n_pass = np.bincount(tp, minlength=n_tasks).astype(float)
    n_fail = np.bincount(tf, minlength=n_tasks).astype(float)
    per_mixed = {k: np.zeros(n_tasks) for k in (
        "top_num", "top_den", "top_chance", "adv_corr", "adv_ordered", "adv_gap",
        "adv_gap_tests", "flat_mixed", "n_fail_mixed", "fail_at_pass")}  # fmt: skip
    for t in np.flatnonzero((n_pass > 0) & (n_fail > 0)):
        in_t = rows[t]
        for key, value in _mixed_task(score[in_t], passed[in_t]).items():
            per_mixed[key][t] = value
    return _TaskParts(
        n_pass=n_pass,
        n_fail=n_fail,
        pooled=PooledPairs.of(task_idx, score, passed, n_tasks),
        strict=strict,
        tied=tied_within,
        **per_mixed,
        praised_fail=np.bincount(tf, weights=praised_f.astype(float), minlength=n_tasks),
        sum_pass=np.bincount(tp, weights=sp, minlength=n_tasks),
        sum_fail=np.bincount(tf, weights=sf, minlength=n_tasks),
        signal=_signal(
            task_idx, score, passed, n_tasks, *(unscored or _NO_UNSCORED), convention
        ),  # fmt: skip
    )


def standardise_within_task(cand: pl.DataFrame) -> pl.DataFrame:
    """`cand`'s scored rows with `z`: (score - task mean) / task population std over the
    task's scored candidates, 0 where they are all equal: GRPO's `std` advantage
    (judgelab.advantage), whatever the convention, since these figures remove the scale;
    rounded to `Z_DECIMALS`, so equal standings in two tasks tie."""
    ok = pl.col("score").is_not_null() & pl.col("score").is_not_nan()
    scored = cand.filter(ok)
    z = grouped_advantages(
        scored.get_column("score").to_numpy().astype(float),
        scored.get_column("task_id").to_numpy(),
    )
    # Two candidates of different tasks with the same standing (z = 1 in both) must tie in
    # the pooled ROC-AUC; float rounding of mean and std would break such ties at random.
    z = np.round(z, Z_DECIMALS)
    return scored.with_columns(pl.Series("z", z, dtype=pl.Float64))


def task_endpoint(
    cand: pl.DataFrame,
    truth: Truth,
    endpoint: str = "pairwise_accuracy",
    convention: Convention = "std",
) -> tuple[np.ndarray, np.ndarray]:
    """(numerator, denominator), one entry per task of `truth.tasks`, such that the figure
    `endpoint` is numerator.sum() / denominator.sum(): for the pairwise accuracies the pair
    credit and the number of (passing, failing) pairs; for the per-mixed-task figures
    (`advantage_fidelity`, `top1_over_chance`, ...) the task's value and 1 for a mixed task."""
    known = truth.table.filter(pl.col("passed").is_not_null())
    joined = known.join(cand.select("candidate_id", "score"), on="candidate_id", how="left")
    task_idx, score, passed, unscored = truth_arrays(joined, truth)
    parts = task_parts(task_idx, score, passed, len(truth.tasks), 1.0, unscored=unscored,
                       convention=convention)  # fmt: skip
    pairs = parts.n_pass * parts.n_fail
    per_task = {
        "signal_fidelity": (parts.signal.fid_num, parts.signal.fid_den),
        "pairwise_accuracy": (parts.strict + 0.5 * parts.tied, pairs),
        "pairwise_accuracy_strict": (parts.strict, pairs),
        "advantage_fidelity": (parts.adv_corr, parts.top_den),
        "top1_over_chance": (parts.top_num - parts.top_chance, parts.top_den),
    }
    if endpoint not in per_task:
        raise ValueError(f"unknown endpoint {endpoint!r}; valid: {', '.join(per_task)}")
    return per_task[endpoint]


def truth_arrays(
    joined: pl.DataFrame, truth: Truth
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """From the candidates with truth joined to a judge's `score` (null: unscored): the scored
    ones' task index, score and verdict, and the unscored ones' task index and verdict."""
    index = {t: i for i, t in enumerate(truth.tasks)}
    ok = pl.col("score").is_not_null() & pl.col("score").is_not_nan()
    usable, unscored = joined.filter(ok), joined.filter(~ok.fill_null(False))

    def idx(frame: pl.DataFrame) -> np.ndarray:
        return np.array([index[t] for t in frame.get_column("task_id").to_list()], dtype=int)

    return (
        idx(usable),
        usable.get_column("score").to_numpy().astype(float),
        usable.get_column("passed").to_numpy().astype(bool),
        (idx(unscored), unscored.get_column("passed").to_numpy().astype(bool)),
    )


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


@dataclass(frozen=True)
class _Joined:
    """`truth_metrics`' inputs joined and split into per-task parts: the truth's known rows,
    those joined to the scores (`joined`), the scored ones (`usable`); the scored ones' task
    index, score, verdict and within-task z; and the raw and the standardised parts."""

    known: pl.DataFrame
    joined: pl.DataFrame
    usable: pl.DataFrame
    task_idx: np.ndarray
    score: np.ndarray
    passed: np.ndarray
    z: np.ndarray
    parts: _TaskParts
    std_parts: _TaskParts

    @classmethod
    def of(
        cls,
        cand: pl.DataFrame,
        truth: Truth,
        praise_threshold: float,
        convention: Convention = "std",
    ) -> _Joined:
        known = truth.table.filter(pl.col("passed").is_not_null())
        zs = standardise_within_task(cand).select("candidate_id", "score", "z")
        joined = known.join(zs, on="candidate_id", how="left")
        usable = joined.filter(pl.col("score").is_not_null() & pl.col("score").is_not_nan())
        task_idx, score, passed, unscored = truth_arrays(joined, truth)
        z = usable.get_column("z").to_numpy().astype(float)
        n_t = len(truth.tasks)
        parts = task_parts(task_idx, score, passed, n_t, praise_threshold, unscored=unscored,
                           convention=convention)  # fmt: skip
        std_parts = task_parts(task_idx, z, passed, n_t, praise_threshold, praised=z > 0)
        return cls(known, joined, usable, task_idx, score, passed, z, parts, std_parts)

    def figures(self, w: np.ndarray) -> dict[str, np.ndarray]:
        """Every figure on each row of task weights `w` (resamples × `truth.tasks`)."""
        std = self.std_parts.figures(w)
        return self.parts.figures(w) | {
            "roc_auc_standardised": std["roc_auc"],
            "false_praise_standardised": std["false_praise_mixed"],
        }


def figure_draws(
    cand: pl.DataFrame,
    truth: Truth,
    praise_threshold: float,
    figure: str,
    weights: np.ndarray,
    convention: Convention = "std",
) -> np.ndarray:
    """One figure of `truth_metrics` on each row of `weights` (resamples × `truth.tasks`): the
    same per-task parts under other task weights, e.g. a resample of clusters of tasks that
    another figure is resampled by too (`analysis.prediction.arm_figure_draws`). NaN where
    the figure is undefined in a resample. Figures pooled over candidates rather than summed
    over tasks (`roc_auc`'s point value) have no such draws."""
    joined = _Joined.of(cand, truth, praise_threshold, convention)
    return np.asarray(joined.figures(weights)[figure], float)


def signal_parts(cand: pl.DataFrame, truth: Truth, convention: Convention = "std") -> _Signal:
    """One judge's per-task signal parts (`truth.tasks` order) under `convention`: what
    signal fidelity is a ratio of (analysis/split_share.py splits it into its two parts)."""
    return _Joined.of(cand, truth, 1.0, convention).parts.signal


def truth_metrics(
    cand: pl.DataFrame,
    truth: Truth,
    praise_threshold: float,
    weights: np.ndarray | None,
    rule: CIRule,
    convention: Convention = "std",
) -> dict[str, Any]:
    """Truth metrics of one evaluator. `cand` comes from `candidate_scores`; `weights` from
    `resample_weights(len(truth.tasks), ...)` (None or zero rows: no CIs); `rule` draws the
    CIs from those resamples (no CI for a figure from fewer than `rule.min_ci_groups`
    contributing tasks); `convention` is the advantage convention of the signal figures
    (`analysis.advantage`)."""
    j = _Joined.of(cand, truth, praise_threshold, convention)
    passed = j.passed
    n_t = len(truth.tasks)
    point = {k: float(v[0]) for k, v in j.figures(np.ones((1, n_t))).items()}
    reasons = _undefined(truth, passed, point)
    if "roc_auc" not in reasons:  # both classes present: the pooled AUCs are defined
        point["roc_auc"] = float(roc_auc_score(passed, j.score))
        point["roc_auc_standardised"] = float(roc_auc_score(passed, j.z))
    scored_ids = cand.filter(pl.col("score").is_not_null()).get_column("candidate_id").to_list()
    known_ids = set(j.known.get_column("candidate_id").to_list())
    result: dict[str, Any] = {
        "truth_evaluator": truth.evaluator,
        "praise_threshold": praise_threshold,
        "n_candidates": j.usable.height,
        "n_candidates_no_truth": sum(1 for c in scored_ids if c not in known_ids),
        "n_candidates_unscored": j.joined.height - j.usable.height,
        "n_tasks": int(np.unique(j.task_idx).size),
        **_counts(j.parts, j.std_parts, passed),
        "ci_level": rule.level,
        "min_ci_groups": rule.min_ci_groups,
        "n_bootstrap": 0 if weights is None else int(weights.shape[0]),
    }
    if weights is None or not weights.shape[0]:
        reasons.setdefault("ci", "bootstrap disabled (analysis.bootstrap = 0) or no tasks")
        weights = None
    jackknife = j.figures(np.ones((n_t, n_t)) - np.eye(n_t)) if n_t else {}
    counts = {**result, "n_pass_fail_pairs": int(passed.sum()) * int((~passed).sum())}
    result |= _headline_figures(point, j.parts, jackknife, counts, weights, reasons, rule)
    result["reasons"] = dict(sorted(reasons.items()))
    return result


def _headline_figures(
    point: dict[str, float],
    parts: _TaskParts,
    jackknife: dict[str, np.ndarray],
    counts: dict[str, Any],
    weights: np.ndarray | None,
    reasons: dict[str, str],
    rule: CIRule,
) -> dict[str, Any]:
    """Each headline figure's value (None when `reasons` names it) with its CI fields."""
    out: dict[str, Any] = {}
    for name in HEADLINE:
        value = None if name in reasons else _finite(point[name])
        out[name] = value
        interval = figure_interval(name, value, parts, jackknife, counts, weights, reasons, rule)
        out.update(interval.fields(name))
    return out


def figure_interval(
    name: str,
    value: float | None,
    parts: _TaskParts,
    jackknife: dict[str, np.ndarray],
    counts: dict[str, Any],
    weights: np.ndarray | None,
    reasons: dict[str, str],
    rule: CIRule,
) -> Interval:
    """One figure's CI (stats.cluster_ci) from the tasks that contribute to it."""
    mask = parts.group_masks[name]
    n_groups = int(mask.sum())
    if value is None:
        return no_interval(reasons.get(name, "undefined"), n_groups)
    if weights is None:  # analysis.bootstrap = 0 turns every CI off, not only the bootstrap's
        return no_interval(reasons["ci"], n_groups)
    units = counts[SHARE_UNITS[name]] if name in SHARE_UNITS else None
    ratio = parts.ratio_terms.get(name)
    bounds = RATIO_BOUNDS.get(name, (-np.inf, np.inf))
    return cluster_ci(value, jackknife[name][mask], n_groups, rule.min_ci_groups, units=units,
                      ratio=ratio, weights=weights, bounds=bounds)  # fmt: skip


def _undefined(truth: Truth, passed: np.ndarray, point: dict[str, float]) -> dict[str, str]:
    """Why each undefined headline figure is undefined, from the usable candidates' truth
    (`passed`) and the point figures."""
    reasons: dict[str, str] = {}
    n_pass, n_fail = int(passed.sum()), int((~passed).sum())
    if truth.evaluator is None or not truth.tasks:
        return dict.fromkeys(HEADLINE, truth.reason or "no execution truth")
    if passed.size == 0:
        why = "no candidate has both an execution result and a score"
        return dict.fromkeys((n for n in HEADLINE if n not in SIGNAL), why) | _signal_reasons(point)
    if n_pass == 0 or n_fail == 0:
        which = "pass" if n_fail == 0 else "fail"
        why = f"only one class present: all {passed.size} candidates with truth {which}"
        reasons["roc_auc"] = reasons["roc_auc_standardised"] = why
    if not np.isfinite(point["pairwise_accuracy"]):
        why = "no task has both a passing and a failing scored candidate"
        reasons.update(dict.fromkeys(WITHIN_GROUP, why))

    if n_fail == 0:
        reasons["false_praise_absolute"] = "no failing candidate was scored"
        reasons["mean_score_failing"] = reasons["false_praise_absolute"]
        reasons["score_gap"] = "needs both passing and failing candidates"
    if n_pass == 0:
        reasons["mean_score_passing"] = "no passing candidate was scored"
        reasons["score_gap"] = "needs both passing and failing candidates"
    return reasons | _signal_reasons(point)


def _signal_reasons(point: dict[str, float]) -> dict[str, str]:
    """Why each undefined signal figure is: they count unscored candidates too, so a judge
    that scored nothing still has them (no signal: fidelity 0, every pair unscored)."""
    reasons: dict[str, str] = {}
    if not np.isfinite(point["right_pair_rate"]):
        why = "no task has both a passing and a failing candidate"
        reasons.update(dict.fromkeys(SIGNAL[1:5], why))
    if not np.isfinite(point["signal_fidelity"]):
        reasons["signal_fidelity"] = (
            "the tests split no task and the judge scores every task's candidates alike"
        )
    if not np.isfinite(point["noise_group_rate"]):
        reasons["noise_group_rate"] = "every task has both a passing and a failing candidate"
    return reasons


def _counts(parts: _TaskParts, std_parts: _TaskParts, passed: np.ndarray) -> dict[str, int]:
    """The n behind each figure: candidates, pairs, groups."""
    return {
        "n_passing": int(passed.sum()),
        "n_failing": int((~passed).sum()),
        "n_pairs": int((parts.n_pass * parts.n_fail).sum()),
        "n_tied_pairs": int(parts.tied.sum()),
        "n_pair_groups": int(((parts.n_pass > 0) & (parts.n_fail > 0)).sum()),
        "n_top1_groups": int(parts.top_den.sum()),
        "n_strict_pairs": int(parts.strict.sum()),
        "n_failing_mixed": int(parts.n_fail_mixed.sum()),
        "n_false_praise": int(parts.praised_fail.sum()),
        "n_false_praise_within_group": int(parts.fail_at_pass.sum()),
        "n_false_praise_standardised": int((std_parts.praised_fail * std_parts.top_den).sum()),
        "n_zero_advantage_mixed": int(parts.flat_mixed.sum()),
        "n_split_groups": int(parts.signal.split.sum()),
        "n_unsplit_groups": int(parts.signal.unsplit.sum()),
        "n_signal_pairs": int(parts.signal.pairs.sum()),
        "n_noise_groups": int(parts.signal.noisy.sum()),
    }
