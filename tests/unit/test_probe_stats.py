"""Probe statistics against their reference implementations on shared fixtures:
Krippendorff's alpha (krippendorff), Kendall's tau-b (scipy), Cohen's kappa (scikit-learn),
ROC-AUC / pairwise / top-1 on calibration groups (scikit-learn, by hand), preference fairness
(Shi et al.'s raw formula, min-max normalised), and the bootstrap CIs."""

from __future__ import annotations

import itertools

import krippendorff
import numpy as np
import polars as pl
import pytest
from scipy.stats import kendalltau
from sklearn.metrics import cohen_kappa_score, roc_auc_score

from judgelab.analysis.agreement import (
    cluster_ci,
    cohen_kappa,
    kendall_tau_b,
    krippendorff_alpha_interval,
    repeat_stability,
    top_choice,
    with_ci,
)
from judgelab.analysis.bias import perturbation_bias, position_bias, self_preference
from judgelab.analysis.probes import calibration
from judgelab.analysis.truth import resample_weights
from judgelab.probes.run import PROBE_COLUMNS

SEEDS = range(8)


def reliability_fixture(seed: int) -> np.ndarray:
    """(raters, units) scores on a coarse grid (ties), ~15 % missing."""
    rng = np.random.default_rng(seed)
    data = np.round(rng.random((3 + seed % 3, 12)) * 10) / 10
    data[rng.random(data.shape) < 0.15] = np.nan
    return data


@pytest.mark.parametrize("seed", SEEDS)
def test_alpha_matches_krippendorff(seed: int) -> None:
    data = reliability_fixture(seed)
    expected = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
    assert krippendorff_alpha_interval(data) == pytest.approx(expected, abs=1e-12)


def test_alpha_edge_cases() -> None:
    assert krippendorff_alpha_interval([[0.5, 0.5], [0.5, 0.5]]) is None  # no variation
    assert krippendorff_alpha_interval([[0.1, np.nan], [np.nan, 0.2]]) is None  # no pairable
    assert krippendorff_alpha_interval([[0.1, 0.9, 0.4], [0.1, 0.9, 0.4]]) == 1.0
    with pytest.raises(ValueError, match="2-D"):
        krippendorff_alpha_interval([0.1, 0.2])


@pytest.mark.parametrize("seed", SEEDS)
def test_tau_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.round(rng.random(4 + seed) * 4) / 4  # ties on purpose
    y = np.round(rng.random(4 + seed) * 4) / 4
    expected = kendalltau(x, y).statistic
    got = kendall_tau_b(x, y)
    if np.isnan(expected):
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_tau_undefined_for_constant_rankings() -> None:
    assert kendall_tau_b([0.5, 0.5, 0.5], [0.1, 0.2, 0.3]) is None
    assert kendall_tau_b([0.5], [0.1]) is None
    assert kendall_tau_b([0.1, 0.2, 0.3], [0.3, 0.2, 0.1]) == -1.0


@pytest.mark.parametrize("seed", SEEDS)
def test_kappa_matches_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels = 2 + seed % 3
    a = rng.integers(0, labels, 30).tolist()
    b = [x if rng.random() < 0.6 else int(rng.integers(0, labels)) for x in a]
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)
    binary_a = [x >= 1 for x in a]
    binary_b = [x >= 1 for x in b]
    assert cohen_kappa(binary_a, binary_b) == pytest.approx(
        cohen_kappa_score(binary_a, binary_b), abs=1e-12
    )


def test_kappa_undefined_when_one_label_throughout() -> None:
    assert cohen_kappa([True, True], [True, True]) is None


def test_top_choice_and_repeat_stability() -> None:
    assert top_choice([0.1, 0.9, 0.3]) == 1
    assert top_choice([0.9, 0.9, 0.3]) == -1  # a tied top is no preference
    # Shi et al.: per instance, the modal choice's share; mean over instances.
    assert repeat_stability([[0, 0, 1], [2, 2, 2], [1]]) == pytest.approx((2 / 3 + 1) / 2)


def test_with_ci_needs_min_groups_and_counts_undefined_resamples() -> None:
    """17.1 and 17.2 for every probe figure: two groups give no CI, and resamples where the
    statistic is undefined are counted (here: those that never draw group 0)."""
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.6, 0.2])

    def mean(idx: np.ndarray) -> float:
        return float(values[idx].mean())

    two = with_ci("m", 2, mean, 500, 3)
    assert two["m"] == pytest.approx(0.25) and two["m_ci_low"] is None
    assert two["m_ci_reason"] == "n = 2 groups: too few for a CI (minimum 5)"
    assert two["m_n_groups"] == 2 and two["m_undefined_resamples"] is None
    assert with_ci("m", 2, mean, 500, 3, min_groups=2)["m_ci_low"] is not None

    def needs_group_0(idx: np.ndarray) -> float | None:
        return float(values[idx].mean()) if 0 in idx else None

    out = with_ci("m", values.size, needs_group_0, 500, 3)
    weights = resample_weights(values.size, 500, 3)
    assert out["m_undefined_resamples"] == int((weights[:, 0] == 0).sum()) > 0
    assert out["m_ci_low"] is not None


def test_cluster_ci_brackets_the_point_and_is_deterministic() -> None:
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.6, 0.2])

    def mean(idx: np.ndarray) -> float:
        return float(values[idx].mean())

    out = with_ci("m", values.size, mean, 500, 3)
    assert out["m"] == pytest.approx(values.mean())
    assert out["m_ci_low"] < out["m"] < out["m_ci_high"]
    assert cluster_ci(values.size, mean, 500, 3) == (out["m_ci_low"], out["m_ci_high"])
    assert cluster_ci(0, mean, 500, 3) == (None, None)
    assert cluster_ci(1, mean, 500, 3) == (None, None)  # one group: no CI, not [x, x]
    assert with_ci("m", values.size, mean, 0, 3)["m_ci_low"] is None


# ------------------------------------------------------------------ probe-table fixtures


def probe_rows(entries: list[dict]) -> pl.DataFrame:
    """Rows of the probe scores table from the few fields a statistic reads."""
    base = {
        "run_id": "r",
        "evaluator": "j",
        "protocol": "ruler",
        "judge": "m",
        "repeat": 0,
        "raw_score": None,
        "status": "scored",
        "out_of_range": False,
        "reason": None,
        "explanation": None,
        "latency_s": 0.0,
        "permutation": None,
        "probe": "calibration",
        "treated": False,
        "kind": "sample",
        "variant": None,
        "policy": None,
        "policy_family": None,
        "passed": None,
        "judge_family": "f",
    }
    rows = []
    for e in entries:
        row = {**base, **e}
        row.setdefault("task_id", row["group_id"])
        row.setdefault("base_id", row["candidate_id"])
        rows.append(row)
    return pl.DataFrame(rows, schema=PROBE_COLUMNS)


def views_fixture(seed: int, k: int = 4, n_groups: int = 5) -> pl.DataFrame:
    """Random scores under the identity order and its reversal."""
    rng = np.random.default_rng(seed)
    entries = []
    for g in range(n_groups):
        for view, order in (("perm:0", list(range(k))), ("perm:1", list(range(k))[::-1])):
            for slot, c in enumerate(order):
                score = float(np.round(rng.random() * 4) / 4)
                entries.append(
                    {
                        "group_id": f"g{g}",
                        "view": view,
                        "candidate_id": f"g{g}c{c}",
                        "slot": slot,
                        "score": score,
                    }  # fmt: skip
                )
    return probe_rows(entries)


def shi_by_hand(rows: pl.DataFrame) -> tuple[float, float]:
    """Position consistency and preference fairness straight from Shi et al.'s definitions,
    over every candidate pair, identity vs reversal (which swaps every pair)."""
    n = consistent = rc = pc = 0
    for _g, part in rows.group_by("group_id"):
        v0 = {r["candidate_id"]: (r["score"], r["slot"]) for r in part.filter(
            pl.col("view") == "perm:0").iter_rows(named=True)}  # fmt: skip
        v1 = {r["candidate_id"]: (r["score"], r["slot"]) for r in part.filter(
            pl.col("view") == "perm:1").iter_rows(named=True)}  # fmt: skip
        for x, y in itertools.combinations(sorted(v0), 2):
            first0 = x if v0[x][1] < v0[y][1] else y
            first1 = x if v1[x][1] < v1[y][1] else y
            win0 = None if v0[x][0] == v0[y][0] else (x if v0[x][0] > v0[y][0] else y)
            win1 = None if v1[x][0] == v1[y][0] else (x if v1[x][0] > v1[y][0] else y)
            n += 1
            if win0 == win1:
                consistent += 1
            elif win0 == first0 and win1 == first1:
                pc += 1
            elif win0 is not None and win1 is not None:
                rc += 1
    inconsistent = n - consistent
    irr = rc / inconsistent if inconsistent else 0.0
    ipr = pc / inconsistent if inconsistent else 0.0
    pf_raw = rc * irr - pc * ipr
    s_min, s_max = -n, n  # all pairs primacy-preferred / all recency-preferred
    pf = (pf_raw - s_min) / (s_max - s_min) * 2 - 1
    return consistent / n, pf


@pytest.mark.parametrize("seed", SEEDS)
def test_position_consistency_and_fairness_match_shi(seed: int) -> None:
    rows = views_fixture(seed)
    out = position_bias(rows, 100, 0)
    pc, pf = shi_by_hand(rows)
    assert out["pairwise_consistency"] == pytest.approx(pc)
    assert out["preference_fairness"] == pytest.approx(pf)
    if out["n_swapped_pairs"] == out["n_primacy_preferred"] + out["n_recency_preferred"] + round(
        out["pairwise_consistency"] * out["n_swapped_pairs"]
    ):  # no tie-inconsistencies: PF reduces to (rc - pc) / n
        assert pf == pytest.approx(
            (out["n_recency_preferred"] - out["n_primacy_preferred"]) / out["n_swapped_pairs"]
        )
    for key in ("position_consistency", "pairwise_consistency", "preference_fairness"):
        assert out[f"{key}_ci_low"] <= out[key] <= out[f"{key}_ci_high"]


def test_position_slot_means_and_deltas_by_hand() -> None:
    # One group, 2 candidates, identity and reversal: a shows 0.8 at slot 0, 0.6 at slot 1.
    rows = probe_rows(
        [
            {"group_id": "g", "view": "perm:0", "candidate_id": "a", "slot": 0, "score": 0.8},
            {"group_id": "g", "view": "perm:0", "candidate_id": "b", "slot": 1, "score": 0.2},
            {"group_id": "g", "view": "perm:1", "candidate_id": "b", "slot": 0, "score": 0.4},
            {"group_id": "g", "view": "perm:1", "candidate_id": "a", "slot": 1, "score": 0.6},
        ]
    )
    out = position_bias(rows, 0, 0)
    assert out["slots"]["0"]["mean"] == pytest.approx(0.6)
    assert out["slots"]["1"]["mean"] == pytest.approx(0.4)
    assert out["slots"]["0"]["bias"] == pytest.approx(0.1)
    assert out["mean_abs_delta"] == pytest.approx(0.2)
    assert out["pairwise_consistency"] == 1.0  # a wins in both orders
    assert out["position_consistency"] == 1.0
    assert out["preference_fairness"] == 0.0


def test_unscored_rows_never_count_as_zero() -> None:
    rows = views_fixture(0, k=3, n_groups=2)
    broken = rows.with_columns(
        pl.when(pl.col("candidate_id") == "g0c0").then(None).otherwise(pl.col("score"))
        .alias("score"),
        pl.when(pl.col("candidate_id") == "g0c0").then(pl.lit("unscored"))
        .otherwise(pl.col("status")).alias("status"),
    )  # fmt: skip
    out = position_bias(broken, 0, 0)
    # g0 loses its pairs with c0 (2 pairs), keeps c1-c2; g1 keeps its 3.
    assert out["n_swapped_pairs"] == 4
    assert out["slots"]["0"]["mean"] is not None


def test_perturbation_effect_by_hand() -> None:
    rows = probe_rows(
        [
            {"group_id": "g", "view": "perm:0", "candidate_id": "a", "slot": 0, "score": 0.5},
            {"group_id": "g", "view": "perm:0", "candidate_id": "b", "slot": 1, "score": 0.5},
            {"group_id": "g", "view": "pert:comments", "candidate_id": "a2", "base_id": "a",
             "treated": True, "slot": 0, "score": 0.9},
            {"group_id": "g", "view": "pert:comments", "candidate_id": "b", "slot": 1,
             "score": 0.4},
        ]
    )  # fmt: skip
    out = perturbation_bias(rows, 0.05, 0, 0)["comments"]
    assert out["delta_treated"] == pytest.approx(0.4)
    assert out["delta_control"] == pytest.approx(-0.1)
    assert out["effect"] == pytest.approx(0.5)
    assert out["robustness_rate"] == 0.0


def test_self_preference_gap_is_controlled_for_pass_status() -> None:
    # Own code passes more often; within each stratum the judge is fair -> gap 0, while a
    # naive difference of means would be 0.9*0.75+0.1*0.25 - (0.9*0.25+0.1*0.75) = 0.4.
    entries = []
    spec = (
        [("me", "fam", True)] * 3
        + [("me", "fam", False)]
        + [("other", "x", True)]
        + [("other", "x", False)] * 3
    )
    for i, (policy, fam, passed) in enumerate(spec):
        for view, slot in (("perm:0", i), ("perm:1", 7 - i)):
            entries.append(
                {
                    "group_id": f"s{i % 2}",
                    "probe": "self_preference",
                    "view": view,
                    "candidate_id": f"c{i}",
                    "slot": slot,
                    "score": 0.9 if passed else 0.1,
                    "policy": policy,
                    "policy_family": fam,
                    "passed": passed,
                }  # fmt: skip
            )
    out = self_preference(probe_rows(entries), "me", "fam", 100, 0)
    assert out["self_gap"] == pytest.approx(0.0)
    assert out["matrix"]["me"]["mean"] == pytest.approx(0.7)
    assert out["matrix"]["other"]["mean"] == pytest.approx(0.3)
    assert out["family_gap"] is None and "family_gap" in out["reasons"]


def test_calibration_matches_sklearn_and_definitions() -> None:
    rng = np.random.default_rng(5)
    entries, truth = [], {}
    for g in range(4):
        for c in range(5):
            passed = c == 0
            cid = f"g{g}c{c}"
            truth[cid] = (g, passed)
            for view, slot in (("perm:0", c), ("perm:1", 4 - c)):
                entries.append(
                    {"group_id": f"g{g}", "view": view, "candidate_id": cid, "slot": slot,
                     "score": float(np.round(rng.random() * 10) / 10), "passed": passed}
                )  # fmt: skip
    rows = probe_rows(entries)
    out = calibration(rows, 0.8, 200, 0)
    means = rows.group_by("candidate_id").agg(pl.col("score").mean(), pl.col("passed").first())
    y = means["passed"].to_list()
    s = means["score"].to_list()
    assert out["roc_auc"] == pytest.approx(roc_auc_score(y, s))
    fails = [sc for sc, p in zip(s, y, strict=True) if not p]
    assert out["false_praise_rate"] == pytest.approx(np.mean([x >= 0.8 for x in fails]))
    by_cand = dict(zip(means["candidate_id"], means["score"], strict=True))
    credit = []
    for g in range(4):
        good = by_cand[f"g{g}c0"]
        credit += [1.0 if good > by_cand[f"g{g}c{c}"] else 0.5 if good == by_cand[f"g{g}c{c}"]
                   else 0.0 for c in range(1, 5)]  # fmt: skip
    assert out["pairwise_accuracy"] == pytest.approx(np.mean(credit))
    # four groups: the value and its n, no CI (issue 17.1: minimum 5 groups)
    assert out["roc_auc_ci_low"] is None and out["roc_auc_n_groups"] == 4
    assert out["roc_auc_ci_reason"] == "n = 4 groups: too few for a CI (minimum 5)"


def test_groups_of_different_sizes_all_count() -> None:
    small = views_fixture(1, k=3, n_groups=1)
    big = views_fixture(2, k=5, n_groups=1).with_columns(pl.lit("h0").alias("group_id"))
    out = position_bias(pl.concat([small, big]), 0, 0)
    assert out["n_groups"] == 2 and out["k"] == 5
    assert out["n_view_pairs"] == 2  # one identity/reversal pair per group
    assert out["n_swapped_pairs"] == 3 + 10
    assert out["slots"]["4"]["mean"] is not None and out["slots"]["0"]["mean"] is not None


def test_probe_scores_schema_names_the_bad_column_and_row(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from judgelab.errors import TableError
    from judgelab.schemas import validate_file

    rows = views_fixture(0, k=2, n_groups=1).with_columns(pl.lit("t").alias("task_id"))
    rows.write_parquet(tmp_path / "ok.parquet")
    assert validate_file(tmp_path / "ok.parquet", "probe_scores").height == 4
    bad = rows.with_columns(
        pl.when(pl.int_range(pl.len()) == 2).then(pl.lit("sideways")).otherwise(pl.col("view"))
        .alias("view")
    )  # fmt: skip
    bad.write_parquet(tmp_path / "bad.parquet")
    with pytest.raises(TableError, match=r"column 'view', row 2.*sideways"):
        validate_file(tmp_path / "bad.parquet", "probe_scores")
    dup = pl.concat([rows, rows.head(1)])
    dup.write_parquet(tmp_path / "dup.parquet")
    with pytest.raises(TableError, match=r"duplicate \(group_id, view, candidate_id"):
        validate_file(tmp_path / "dup.parquet", "probe_scores")


def test_an_all_unscored_judge_gives_reasons_not_errors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from judgelab.analysis.probes import run_probe_analysis
    from judgelab.config import ProbesSettings
    from judgelab.probes.run import CANDIDATE_COLUMNS

    rows = views_fixture(0, k=3, n_groups=2).with_columns(
        pl.lit(None, dtype=pl.Float64).alias("score"),
        pl.lit("unscored").alias("status"),
        pl.lit("judge reply error after 3 attempts: bad ids").alias("reason"),
    )
    cands = pl.DataFrame(schema=CANDIDATE_COLUMNS)
    m = run_probe_analysis(cands, rows, ProbesSettings(bootstrap=10), {}, tmp_path)
    j = m["judges"]["j"]
    assert j["rows"]["unscored_rate"] == 1.0
    assert j["position"]["reason"]
    assert j["self_preference"]["reason"]
    assert j["calibration"]["roc_auc"] is None and j["calibration"]["reasons"]["roc_auc"]
    assert m["agreement"]["reason"]
    assert (tmp_path / "plots" / "self_preference.png").exists()


def test_null_position_figures_say_why() -> None:
    # Candidate b is unscored in the reversal: no pair is scored in both orders.
    rows = probe_rows(
        [
            {"group_id": "g", "view": "perm:0", "candidate_id": "a", "slot": 0, "score": 0.8},
            {"group_id": "g", "view": "perm:0", "candidate_id": "b", "slot": 1, "score": 0.2},
            {"group_id": "g", "view": "perm:1", "candidate_id": "a", "slot": 1, "score": 0.6},
            {"group_id": "g", "view": "perm:1", "candidate_id": "b", "slot": 0, "score": None,
             "status": "unscored", "reason": "out of range: raw score 7"},
        ]
    )  # fmt: skip
    out = position_bias(rows, 0, 0)
    assert out["preference_fairness"] is None
    assert "swap" in out["reasons"]["preference_fairness"]
    assert out["mean_abs_delta"] == pytest.approx(0.2)
    assert "mean_abs_delta" not in out["reasons"]
