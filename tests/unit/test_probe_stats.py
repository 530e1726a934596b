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
    cohen_kappa,
    kendall_tau_b,
    krippendorff_alpha_interval,
    with_ci,
)
from judgelab.analysis.noise_floor import noise_floor
from judgelab.analysis.perturbation import perturbation_bias
from judgelab.analysis.position import position_bias
from judgelab.analysis.probe_views import top_of
from judgelab.analysis.probes import calibration, probe_ci_rule
from judgelab.analysis.self_preference import self_preference
from judgelab.analysis.stats import CI_LEVEL, CIRule, resample_weights
from judgelab.config import AnalysisSettings, ProbesSettings
from judgelab.schemas import ProbeCandidatesSchema, ProbeScoresSchema, columns

SEEDS = range(8)


def ci(n_boot: int, seed: int, min_ci_groups: int) -> CIRule:
    return CIRule(min_ci_groups, n_boot, seed, CI_LEVEL)


def probe_rule(probes: ProbesSettings, min_ci_groups: int) -> CIRule:
    """The probes stage's rule: its own resamples, the analysis minimum."""
    return probe_ci_rule(AnalysisSettings(min_ci_groups=min_ci_groups), probes)


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


def test_a_tied_top_is_no_preference() -> None:
    assert top_of({"a": (0.1, 0), "b": (0.9, 1), "c": (0.3, 2)}) == "b"
    assert top_of({"a": (0.9, 0), "b": (0.9, 1), "c": (0.3, 2)}) is None
    assert top_of({}) is None


def test_with_ci_needs_min_ci_groups_and_counts_undefined_resamples() -> None:
    """17.1 and 17.2 for every probe figure: two groups give no CI, and resamples where the
    statistic is undefined are counted (here: those that never draw group 0)."""
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.6, 0.2])

    def mean(idx: np.ndarray) -> float:
        return float(values[idx].mean())

    two = with_ci("m", 2, mean, ci(500, 3, 5))
    assert two["m"] == pytest.approx(0.25) and two["m_ci_low"] is None
    assert two["m_ci_reason"] == "n = 2 groups: too few for a CI (minimum 5)"
    assert two["m_n_groups"] == 2 and two["m_undefined_resamples"] is None
    assert with_ci("m", 2, mean, ci(500, 3, 2))["m_ci_low"] is not None

    def needs_group_0(idx: np.ndarray) -> float | None:
        return float(values[idx].mean()) if 0 in idx else None

    out = with_ci("m", values.size, needs_group_0, ci(500, 3, 5))
    weights = resample_weights(values.size, 500, 3)
    assert out["m_undefined_resamples"] == int((weights[:, 0] == 0).sum()) > 0
    assert out["m_ci_low"] is not None


def test_with_ci_brackets_the_point_and_is_deterministic() -> None:
    values = np.array([0.1, 0.4, 0.35, 0.8, 0.6, 0.2])

    def mean(idx: np.ndarray) -> float:
        return float(values[idx].mean())

    out = with_ci("m", values.size, mean, ci(500, 3, 5))
    assert out["m"] == pytest.approx(values.mean())
    assert out["m_ci_low"] < out["m"] < out["m_ci_high"]
    assert with_ci("m", values.size, mean, ci(500, 3, 5)) == out
    assert with_ci("m", 0, mean, ci(500, 3, 2))["m_ci_low"] is None
    one = with_ci("m", 1, mean, ci(500, 3, 2))  # one group: no CI, not [x, x]
    assert one["m_ci_low"] is None and one["m_ci_reason"] == (
        "n = 1 group: too few for a CI (minimum 2)"
    )
    with pytest.raises(ValueError, match="at least 2 groups"):
        ci(500, 3, 1)
    assert with_ci("m", values.size, mean, ci(0, 3, 5))["m_ci_low"] is None


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
        "outcome": None,
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
    return pl.DataFrame(rows, schema=columns(ProbeScoresSchema))


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


def shi_by_hand(rows: pl.DataFrame) -> tuple[float, float, float]:
    """Position consistency and preference fairness straight from Shi et al.'s definitions,
    over every candidate pair, identity vs reversal (which swaps every pair); and the
    tie-aware fairness, a pair tied in one order and ranked in the other counting half
    towards the slot that won."""
    n = consistent = rc = pc = 0
    half = 0.0
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
            else:  # tied in one order: +1/2 when the earlier-shown one won the other
                won = win0 if win0 is not None else win1
                first = first0 if win0 is not None else first1
                half += 0.5 if won == first else -0.5
    inconsistent = n - consistent
    irr = rc / inconsistent if inconsistent else 0.0
    ipr = pc / inconsistent if inconsistent else 0.0
    pf_raw = rc * irr - pc * ipr
    s_min, s_max = -n, n  # all pairs primacy-preferred / all recency-preferred
    pf = (pf_raw - s_min) / (s_max - s_min) * 2 - 1
    return consistent / n, pf, (rc - pc - half) / n


@pytest.mark.parametrize("seed", SEEDS)
def test_position_consistency_and_fairness_match_shi(seed: int) -> None:
    rows = views_fixture(seed)
    out = position_bias(rows, ci(100, 0, 5))
    pc, pf, pf_ties = shi_by_hand(rows)
    assert out["position_consistency_with_flat"] == pytest.approx(pc)
    n, flat = out["n_swapped_pairs"], out["n_flat_pairs"]
    assert out["flat_pair_rate"] == pytest.approx(flat / n)
    assert out["position_consistency"] == pytest.approx((pc * n - flat) / (n - flat))
    assert out["preference_fairness"] == pytest.approx(pf)
    assert out["preference_fairness_tie_aware"] == pytest.approx(pf_ties)
    if out["n_swapped_pairs"] == out["n_primacy_preferred"] + out["n_recency_preferred"] + round(
        out["position_consistency_with_flat"] * out["n_swapped_pairs"]
    ):  # no tie-inconsistencies: PF reduces to (rc - pc) / n
        assert pf == pytest.approx(
            (out["n_recency_preferred"] - out["n_primacy_preferred"]) / out["n_swapped_pairs"]
        )
        assert pf_ties == pytest.approx(pf)
    for key in ("position_consistency", "top_choice_agreement", "preference_fairness"):
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
    out = position_bias(rows, ci(0, 0, 5))
    assert out["slots"]["0"]["mean"] == pytest.approx(0.6)
    assert out["slots"]["1"]["mean"] == pytest.approx(0.4)
    assert out["slots"]["0"]["bias"] == pytest.approx(0.1)
    assert out["mean_abs_delta"] == pytest.approx(0.2)
    assert out["position_consistency"] == 1.0  # a wins in both orders
    assert out["top_choice_agreement"] == 1.0
    assert out["preference_fairness"] == 0.0


def test_unscored_rows_never_count_as_zero() -> None:
    rows = views_fixture(0, k=3, n_groups=2)
    broken = rows.with_columns(
        pl.when(pl.col("candidate_id") == "g0c0").then(None).otherwise(pl.col("score"))
        .alias("score"),
        pl.when(pl.col("candidate_id") == "g0c0").then(pl.lit("unscored"))
        .otherwise(pl.col("status")).alias("status"),
    )  # fmt: skip
    out = position_bias(broken, ci(0, 0, 5))
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
    out = perturbation_bias(rows, 0.05, ci(0, 0, 5))["comments"]
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
    out = self_preference(probe_rows(entries), "me", "fam", ci(100, 0, 2))
    assert out["self_gap"] == pytest.approx(0.0)
    assert out["matrix"]["me"]["mean"] == pytest.approx(0.7)
    assert out["matrix"]["other"]["mean"] == pytest.approx(0.3)
    assert out["family_gap"] is None and "family_gap" in out["reasons"]


def _self_rows(spec: list[tuple[str, str, str, bool, float]]) -> pl.DataFrame:
    """(group, policy, family, passed, score) per candidate, judged in two orders."""
    entries = []
    for i, (group, policy, fam, passed, score) in enumerate(spec):
        for view, slot in (("perm:0", i), ("perm:1", 9 - i)):
            entries.append({"group_id": group, "probe": "self_preference", "view": view,
                            "candidate_id": f"c{i}", "slot": slot, "score": score,
                            "policy": policy, "policy_family": fam, "passed": passed})  # fmt: skip
    return probe_rows(entries)


def test_self_preference_is_matched_on_task_and_verdict() -> None:
    """Own code is compared only with another family's code of the same task and verdict:
    s0 passing, me 0.9 vs other 0.5 -> 0.4. Pooled over tasks (the unmatched gap) the passing
    stratum adds s1's other (0.3): 0.9 - 0.4 = 0.5; my failing candidate has no match."""
    rows = _self_rows([
        ("s0", "me", "fam", True, 0.9), ("s0", "other", "x", True, 0.5),
        ("s1", "me", "fam", False, 0.1), ("s1", "other", "x", True, 0.3),
    ])  # fmt: skip
    out = self_preference(rows, "me", "fam", ci(0, 0, 2))
    assert out["self_gap"] == pytest.approx(0.4)
    assert out["self_gap_unmatched"] == pytest.approx(0.5)
    assert out["n_self_matched_cells"] == 1 and out["self_gap_confounded"] is False


def test_self_preference_without_a_match_is_flagged_confounded() -> None:
    rows = _self_rows([("s0", "me", "fam", True, 0.9), ("s0", "other", "x", False, 0.2),
                       ("s1", "other", "x", True, 0.3)])  # fmt: skip
    out = self_preference(rows, "me", "fam", ci(0, 0, 2))
    assert out["self_gap"] is None and "confounded" in out["reasons"]["self_gap"]
    assert out["self_gap_unmatched"] == pytest.approx(0.9 - 0.3)  # another task's code
    assert out["self_gap_confounded"] is True and out["n_self_matched_cells"] == 0


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
    out = calibration(rows, 0.8, ci(200, 0, 4))
    means = rows.group_by("candidate_id").agg(pl.col("score").mean(), pl.col("passed").first())
    y = means["passed"].to_list()
    s = means["score"].to_list()
    assert out["roc_auc"] == pytest.approx(roc_auc_score(y, s))
    fails = [sc for sc, p in zip(s, y, strict=True) if not p]
    assert out["false_praise_absolute"] == pytest.approx(np.mean([x >= 0.8 for x in fails]))
    by_cand = dict(zip(means["candidate_id"], means["score"], strict=True))
    credit = []
    for g in range(4):
        good = by_cand[f"g{g}c0"]
        credit += [1.0 if good > by_cand[f"g{g}c{c}"] else 0.5 if good == by_cand[f"g{g}c{c}"]
                   else 0.0 for c in range(1, 5)]  # fmt: skip
    assert out["pairwise_accuracy"] == pytest.approx(np.mean(credit))
    # four groups and a minimum of 4: a CI; under the default minimum of 5, the value, its
    # n and the reason instead: an interval from so few groups would look precise and not be
    assert out["roc_auc_ci_low"] is not None and out["roc_auc_n_groups"] == 4
    five = calibration(rows, 0.8, ci(200, 0, 5))
    assert five["roc_auc"] == out["roc_auc"] and five["roc_auc_ci_low"] is None
    assert five["roc_auc_ci_reason"] == "n = 4 groups: too few for a CI (minimum 5)"


def test_groups_of_different_sizes_all_count() -> None:
    small = views_fixture(1, k=3, n_groups=1)
    big = views_fixture(2, k=5, n_groups=1).with_columns(pl.lit("h0").alias("group_id"))
    out = position_bias(pl.concat([small, big]), ci(0, 0, 5))
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
    from judgelab.config import ProbesSettings
    from judgelab.report.probes import run_probe_analysis

    rows = views_fixture(0, k=3, n_groups=2).with_columns(
        pl.lit(None, dtype=pl.Float64).alias("score"),
        pl.lit("unscored").alias("status"),
        pl.lit("judge reply error after 3 attempts: bad ids").alias("reason"),
    )
    cands = pl.DataFrame(schema=columns(ProbeCandidatesSchema))
    probes = ProbesSettings(bootstrap=10)
    m = run_probe_analysis(cands, rows, probes, {}, tmp_path, rule=probe_rule(probes, 5))
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
    out = position_bias(rows, ci(0, 0, 5))
    assert out["preference_fairness"] is None
    assert "swap" in out["reasons"]["preference_fairness"]
    assert out["mean_abs_delta"] == pytest.approx(0.2)
    assert "mean_abs_delta" not in out["reasons"]


# ------------------------------------------- position bias, noise floors, perturbations


def two_views(group: str, first: list[float], second: list[float]) -> list[dict]:
    """Candidates c0..c{k-1} of `group` at slots 0..k-1 in ``perm:0`` (scores `first`, by slot)
    and reversed in ``perm:1`` (scores `second`, by slot)."""
    k = len(first)
    rows = [{"group_id": group, "view": "perm:0", "candidate_id": f"{group}c{i}", "slot": i,
             "score": first[i]} for i in range(k)]  # fmt: skip
    rows += [{"group_id": group, "view": "perm:1", "candidate_id": f"{group}c{k - 1 - s}",
              "slot": s, "score": second[s]} for s in range(k)]  # fmt: skip
    return rows


# ruler-qwen-1.5b's scores by slot in one group of the default probe run, in two orders
RULER_CASE = ([1.0, 0.85, 0.7, 0.0], [0.0, 0.0, 0.0, 0.0])


def test_the_quoted_ruler_case_reads_as_position_driven() -> None:
    # ruler-qwen-1.5b in the default probe run: one view scored 1.0 / 0.85 / 0.7 / 0.0 in slot
    # order, the mirrored view all 0.0. Every pair is ranked by slot in the first view and tied
    # in the second: 6 pairs, each won by the earlier-shown candidate.
    out = position_bias(probe_rows(two_views("g", *RULER_CASE)), ci(1000, 0, 5))
    assert out["n_swapped_pairs"] == 6
    assert out["position_consistency"] == 0.0
    assert (out["n_primacy_preferred"], out["n_recency_preferred"]) == (0, 0)
    assert (out["n_primacy_tied"], out["n_recency_tied"]) == (6, 0)
    # Winning slots (0-based): c0 beats c1, c2, c3 from slot 0; c1 beats c2, c3 from slot 1;
    # c2 beats c3 from slot 2.
    assert out["tied_pair_winner_slots"] == {"0": 3, "1": 2, "2": 1}
    # Each pair leans +1/2 towards the earlier slot: PF = -(6 * 1/2) / 6.
    assert out["preference_fairness_tie_aware"] == pytest.approx(-0.5)
    assert out["preference_fairness"] == 0.0  # as published: ties count as neither
    # Same candidate first vs last: c0 1.0 (slot 0) - 0.0 (slot 3); c3 0.0 - 0.0 -> mean 0.5.
    assert out["slot_effect"] == pytest.approx(0.5)
    assert out["slots"]["0"]["effect"] == pytest.approx(0.5)
    # Slot 1 vs 2: c1 0.85 - 0.0, c2 0.0 - 0.7 -> 0.075; the mirrors are the negatives.
    assert out["slots"]["1"]["effect"] == pytest.approx(0.075)
    assert out["slots"]["2"]["effect"] == pytest.approx(-0.075)
    assert out["slots"]["3"]["effect"] == pytest.approx(-0.5)
    assert out["n_slot_effect_pairs"] == 2
    # One group: values, no CI, and the reason.
    for key in ("slot_effect", "preference_fairness", "position_consistency"):
        assert out[f"{key}_ci_low"] is None and out[f"{key}_ci_high"] is None
        assert out[f"{key}_ci_reason"] == "n = 1 group: too few for a CI (minimum 5)"


def test_slot_trend_by_hand_on_the_ruler_case() -> None:
    """Within-candidate least squares: c0 at slots 0/3 scores 1.0/0.0 (xy -1.5, xx 4.5), c1
    at 1/2 0.85/0.0 (-0.425, 0.5), c2 at 2/1 0.7/0.0 (+0.35, 0.5), c3 0/0 (0, 4.5): slope
    -1.575 / 10 per slot (earlier slots favoured)."""
    out = position_bias(probe_rows(two_views("g", *RULER_CASE)), ci(0, 0, 5))
    assert out["slot_trend"] == pytest.approx(-0.1575)
    assert out["slot_trend_p"] is None  # one task: no test
    assert out["slots"]["0"]["mean"] == pytest.approx(0.5) and out["slots"]["0"]["n_scores"] == 2


def test_slot_trend_recovers_a_planted_slope_and_its_test() -> None:
    """Candidates of different quality, each task with its own slope per slot: the trend is
    the pooled within-candidate slope, and its p-value is the t-test on the leave-one-task-out
    slopes (computed here with a loop and scipy)."""
    from scipy import stats as scipy_stats

    slopes = [-0.10, -0.06, -0.12, -0.02, -0.08, -0.09]
    entries: list[dict] = []
    for g, b in enumerate(slopes):
        quality = [0.2, 0.9, 0.5, 0.7]
        first = [quality[c] + b * c for c in range(4)]  # perm:0: candidate c at slot c
        second = [quality[3 - s] + b * s for s in range(4)]  # perm:1, by slot
        entries += two_views(f"g{g}", first, second)
    out = position_bias(probe_rows(entries), ci(200, 0, 5))
    assert out["slot_trend"] == pytest.approx(np.mean(slopes))  # equal xx per task
    left_out = [np.mean(np.delete(slopes, i)) for i in range(6)]
    se = np.sqrt(5 / 6 * np.sum((np.array(left_out) - np.mean(left_out)) ** 2))
    p = 2 * scipy_stats.t.sf(abs(np.mean(slopes)) / se, 5)
    assert out["slot_trend_p"] == pytest.approx(p) and p < 0.01
    assert out["slot_trend_ci_high"] < 0


def test_slot_effect_ci_over_groups_against_a_hand_bootstrap() -> None:
    from judgelab.analysis.stats import resample_weights

    # Five groups: the RULER case with the first view scaled, so groups differ.
    scales = [1.0, 0.5, 0.8, 0.2, 0.6]
    entries: list[dict] = []
    for g, a in enumerate(scales):
        entries += two_views(f"g{g}", [a * x for x in RULER_CASE[0]], RULER_CASE[1])
    rows = probe_rows(entries)
    out = position_bias(rows, ci(400, 7, 5))
    # Per group: effect pairs sum a * 1.0 (c0) + 0.0 (c3) over 2 pairs; pooled ratio.
    num = np.array([a * 1.0 for a in scales])
    den = np.full(len(scales), 2.0)
    assert out["slot_effect"] == pytest.approx(num.sum() / den.sum())
    w = resample_weights(len(scales), 400, 7)
    draws = (w @ num) / (w @ den)
    low, high = np.quantile(draws, [0.025, 0.975])
    assert out["slot_effect_ci_low"] == pytest.approx(low)
    assert out["slot_effect_ci_high"] == pytest.approx(high)
    assert out["slot_effect_ci_reason"] is None
    # PF by hand: every pair of every group leans +1/2 (ties in the mirrored view).
    assert out["preference_fairness_tie_aware"] == pytest.approx(-0.5)
    # Two of the groups: value, no CI, the reason.
    two = position_bias(rows.filter(pl.col("group_id").is_in(["g0", "g1"])), ci(400, 7, 5))
    assert two["slot_effect"] == pytest.approx((1.0 + 0.5) / 4)
    assert two["slot_effect_ci_low"] is None and two["slot_effect_ci_high"] is None
    assert two["slot_effect_ci_reason"] == "n = 2 groups: too few for a CI (minimum 5)"


def test_a_tied_top_is_not_agreement() -> None:
    # perm:0 ties a and b at the top; perm:1 (reversed) ties b and c: different tops, so the
    # two views disagree (today's top_choice gives -1 == -1, "agreement").
    rows = probe_rows(two_views("g", [0.9, 0.9, 0.1], [0.9, 0.9, 0.2]))
    out = position_bias(rows, ci(0, 0, 5))
    assert out["top_choice_agreement"] == 0.0
    assert (out["n_view_pairs"], out["n_tied_view_pairs"]) == (1, 1)
    # top_slot_rate counts only views with a unique top.
    rows = probe_rows(two_views("g", [0.9, 0.9, 0.1], [0.1, 0.2, 0.9]))
    out = position_bias(rows, ci(0, 0, 5))
    assert (out["n_top_views"], out["n_tied_top_views"]) == (1, 1)
    assert [out["slots"][j]["top_rate"] for j in "012"] == [0.0, 0.0, 1.0]
    # Repeat stability: two calls whose tops tie among different candidates are not stable.
    calls = [{"group_id": "g", "view": "perm:0", "candidate_id": c, "slot": i, "repeat": r,
              "score": s} for r, scores in ((1, (0.9, 0.9, 0.1)), (2, (0.1, 0.9, 0.9)))
             for i, (c, s) in enumerate(zip("abc", scores, strict=True))]  # fmt: skip
    floor = noise_floor(probe_rows(calls), [1, 2], 0.05, ci(0, 0, 5))
    assert floor["stability"] == 0.0
    assert floor["top_choice_agreement"] == 0.0


def noisy_judge_rows(seed: int, n_groups: int = 6, k: int = 4) -> tuple[pl.DataFrame, dict]:
    """A judge with no position bias but noise: each candidate has a true score, every call
    adds noise of +-0.2; identity, reversal and two repeats of the identity."""
    rng = np.random.default_rng(seed)
    entries = []
    calls: dict[tuple[str, int], dict[str, float]] = {}
    for g in range(n_groups):
        true = rng.choice([0.2, 0.4, 0.6, 0.8], size=k)
        for view, repeat, order in (("perm:0", 0, range(k)), ("perm:1", 0, range(k)[::-1]),
                                    ("perm:0", 1, range(k)), ("perm:0", 2, range(k))):  # fmt: skip
            for slot, c in enumerate(order):
                score = float(np.clip(true[c] + rng.choice([-0.2, 0.0, 0.2]), 0, 1))
                cid = f"g{g}c{c}"
                entries.append({"group_id": f"g{g}", "view": view, "repeat": repeat,
                                "candidate_id": cid, "slot": slot, "score": score})  # fmt: skip
                if view == "perm:0" and repeat:
                    calls.setdefault((f"g{g}", repeat), {})[f"g{g}c{c}"] = score
    return probe_rows(entries), calls


def test_noise_floor_by_hand_and_beside_every_order_and_perturbation_figure(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from judgelab.config import ProbesSettings
    from judgelab.report.probes import run_probe_analysis

    rows, calls = noisy_judge_rows(3)
    floor = noise_floor(rows, [1, 2], 0.05, ci(200, 0, 5))
    # By hand, repeat 1 against repeat 2 in every group (identity order: slot = index).
    same = pairs = inst = flat = 0.0
    deltas, robust = [], []
    top_same = 0
    for g in range(6):
        a, b = calls[(f"g{g}", 1)], calls[(f"g{g}", 2)]
        ids = [f"g{g}c{c}" for c in range(4)]
        for x, y in itertools.combinations(ids, 2):  # x is shown before y
            pa = 1.0 if a[x] > a[y] else 0.5 if a[x] == a[y] else 0.0
            pb = 1.0 if b[x] > b[y] else 0.5 if b[x] == b[y] else 0.0
            pairs += 1
            same += pa == pb
            flat += pa == pb == 0.5  # tied in both calls: left out of consistency
            inst += abs(pa - pb)
        deltas += [abs(a[c] - b[c]) for c in ids]
        robust += [abs(a[c] - b[c]) <= 0.05 for c in ids]
        ta = [c for c in ids if a[c] == max(a.values())]
        tb = [c for c in ids if b[c] == max(b.values())]
        top_same += len(ta) == 1 and ta == tb
    assert floor["n_groups"] == 6 and floor["n_call_pairs"] == 6
    assert flat > 0  # the fixture has flat pairs
    assert floor["position_consistency"] == pytest.approx((same - flat) / (pairs - flat))
    assert floor["position_consistency_with_flat"] == pytest.approx(same / pairs)
    assert floor["pair_instability"] == pytest.approx(inst / pairs)
    assert floor["mean_abs_delta"] == pytest.approx(np.mean(deltas))
    assert floor["robustness_rate"] == pytest.approx(np.mean(robust))
    assert floor["top_choice_agreement"] == pytest.approx(top_same / 6)
    assert floor["position_consistency_ci_low"] <= floor["position_consistency"]

    # Through the whole analysis, the floor at the order views' temperature (repeat 0 is one
    # more call: 3 per group) sits beside each order and perturbation figure, on the groups of
    # the figure it floors: g6 has repeats but no second order and no perturbation.
    pert = [{"group_id": f"g{g}", "view": "pert:comments", "candidate_id": f"g{g}c{c}",
             "slot": c, "treated": c % 2 == 0, "score": 0.5} for g in range(5)
            for c in range(4)]  # fmt: skip
    lone = [{"group_id": "g6", "view": "perm:0", "repeat": r, "candidate_id": f"g6c{c}",
             "slot": c, "score": 0.1 * c + 0.3 * (r == 1)} for r in range(3)
            for c in range(4)]  # fmt: skip
    rows = pl.concat([rows, probe_rows(pert), probe_rows(lone)])
    settings = ProbesSettings(temperature=0.5, repeats=2, bootstrap=50)
    assert settings.repeat_temperature == 0.5  # unset: the order views' temperature
    cands = pl.DataFrame(schema=columns(ProbeCandidatesSchema))
    m = run_probe_analysis(cands, rows, settings, {}, tmp_path, rule=probe_rule(settings, 5))
    j = m["judges"]["j"]
    floor, pert_floor = j["noise_floor"], j["noise_floor_perturbation"]
    assert floor["repeats"] == [0, 1, 2] and floor["calls_per_group"] == 3
    assert floor["n_groups"] == 6 and floor["n_call_pairs"] == 6 * 3  # not g6
    assert pert_floor["n_groups"] == 5  # the perturbed groups only
    by_hand = noise_floor(rows, [0, 1, 2], 0.05, ci(50, 0, 5),
                          groups=[f"g{g}" for g in range(6)])  # fmt: skip
    assert floor["position_consistency"] == pytest.approx(by_hand["position_consistency"])
    pos = j["position"]
    assert pos["position_consistency_noise_floor"] == floor["position_consistency"]
    assert pos["top_choice_agreement_noise_floor"] == floor["top_choice_agreement"]
    assert pos["preference_fairness_noise_floor"] == floor["pair_instability"]
    assert pos["slot_effect_noise_floor"] == floor["mean_abs_delta"]
    comments = j["perturbation"]["comments"]
    assert comments["effect_noise_floor"] == pert_floor["mean_abs_delta"]
    assert comments["robustness_rate_noise_floor"] == pert_floor["robustness_rate"]
    report = (tmp_path / "report.md").read_text()
    assert f"(floor {floor['position_consistency']:.3f})" in report
    # Repeats at another temperature: measured and kept, but no floor beside the figures.
    other_t = ProbesSettings(temperature=0.0, repeat_temperature=0.7, repeats=2)
    m = run_probe_analysis(
        cands, rows, other_t, {}, tmp_path / "other", rule=probe_rule(other_t, 5)
    )
    j = m["judges"]["j"]
    assert j["noise_floor"]["repeats"] == [1, 2] and j["noise_floor"]["temperature"] == 0.7
    assert j["position"]["position_consistency_noise_floor"] is None
    assert "another temperature" in j["position"]["noise_floor_reason"]
    # Two calls per group (one repeat): too few for a floor.
    one = ProbesSettings(temperature=0.5, repeats=1)
    m = run_probe_analysis(cands, rows.filter(pl.col("repeat") < 2), one, {}, tmp_path / "one",
                           rule=probe_rule(one, 5))  # fmt: skip
    assert "needs 3" in m["judges"]["j"]["position"]["noise_floor_reason"]


def test_report_names_position_consistency_as_shi_et_al(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from judgelab.config import ProbesSettings
    from judgelab.report.probes import run_probe_analysis

    rows = views_fixture(4)
    pc, _pf, _ = shi_by_hand(rows)
    cands = pl.DataFrame(schema=columns(ProbeCandidatesSchema))
    probes = ProbesSettings(bootstrap=50)
    m = run_probe_analysis(cands, rows, probes, {}, tmp_path, rule=probe_rule(probes, 5))
    pos = m["judges"]["j"]["position"]
    assert pos["position_consistency"] == pytest.approx(pc, abs=1e-6)  # the pairwise figure
    assert "pairwise_consistency" not in pos
    assert "top_choice_agreement" in pos
    lines = (tmp_path / "report.md").read_text().splitlines()
    header = next(line for line in lines if line.startswith("| judge | groups |"))
    row = next(line for line in lines if line.startswith("| j |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    cells = [c.strip() for c in row.strip("|").split("|")]
    cell = cells[cols.index("position consistency (Shi et al.)")]
    assert cell.startswith(f"{pos['position_consistency']:.3f} [")
    assert cells[cols.index("top-choice agreement")].startswith(
        f"{pos['top_choice_agreement']:.3f}"
    )


def test_perturbation_effect_needs_controls() -> None:
    # Every member perturbed: no control, so no controlled effect (today: delta_treated).
    rows = probe_rows(
        [
            {"group_id": "g", "view": "perm:0", "candidate_id": "a", "slot": 0, "score": 0.5},
            {"group_id": "g", "view": "perm:0", "candidate_id": "b", "slot": 1, "score": 0.5},
            {"group_id": "g", "view": "pert:comments", "candidate_id": "a2", "base_id": "a",
             "treated": True, "slot": 0, "score": 0.9},
            {"group_id": "g", "view": "pert:comments", "candidate_id": "b2", "base_id": "b",
             "treated": True, "slot": 1, "score": 0.7},
        ]
    )  # fmt: skip
    out = perturbation_bias(rows, 0.05, ci(0, 0, 5))["comments"]
    assert out["delta_treated"] == pytest.approx(0.3)
    assert out["effect"] is None and out["effect_ci_low"] is None
    assert "no unperturbed control" in out["reasons"]["effect"]
    assert out["n_control"] == 0


def test_order_consistent_accuracy_by_hand() -> None:
    """JudgeBench's rule: a (passing, failing) pair is right only when the passing one wins in
    both orders; a tie in either order, or a loss, is not right."""
    from judgelab.analysis.probes import calibration

    entries = []
    # group a: p1 passes, f1 and f2 fail. Identity: p1 .9, f1 .5, f2 .9 (tie with p1).
    # Reversal: p1 .8, f1 .2, f2 .1. Pairs: (p1, f1) right in both; (p1, f2) tied once: wrong.
    for view, scores in (("perm:0", (0.9, 0.5, 0.9)), ("perm:1", (0.8, 0.2, 0.1))):
        for slot, (cid, passed, s) in enumerate(
            zip(("a-p1", "a-f1", "a-f2"), (True, False, False), scores, strict=True)
        ):
            entries.append({"group_id": "a", "view": view, "candidate_id": cid,
                            "slot": slot if view == "perm:0" else 2 - slot, "score": s,
                            "passed": passed})  # fmt: skip
    # group b: p wins in identity, loses in reversal: wrong; scored in one view only: left out
    for view, s_p, s_f in (("perm:0", 0.7, 0.3), ("perm:1", 0.2, 0.6)):
        entries += [{"group_id": "b", "view": view, "candidate_id": "b-p", "slot": 0,
                     "score": s_p, "passed": True},
                    {"group_id": "b", "view": view, "candidate_id": "b-f", "slot": 1,
                     "score": s_f, "passed": False}]  # fmt: skip
    entries.append({"group_id": "b", "view": "perm:0", "candidate_id": "b-f2", "slot": 2,
                    "score": 0.0, "passed": False})  # fmt: skip
    out = calibration(probe_rows(entries), 0.8, ci(50, 0, 5))
    assert (out["order_consistent_pairs"], out["order_pairs"]) == (1, 3)
    assert out["order_consistent_accuracy"] == pytest.approx(1 / 3)
    assert out["order_consistent_accuracy_n_groups"] == 2
    assert (
        out["order_consistent_accuracy_ci_reason"] == "n = 2 groups: too few for a CI (minimum 5)"
    )
