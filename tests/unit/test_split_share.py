"""Signal fidelity's two parts and the ranking across split shares (analysis/split_share.py),
and the noise charge under each advantage convention: by hand (docs/METRICS.md's worked
example), against an independent re-implementation, and at the audit's own share against
`truth_metrics`."""

from __future__ import annotations

import numpy as np
import pytest

from judgelab.analysis.fidelity import truth_metrics
from judgelab.analysis.split_share import SHARES, crossing, fidelity_at, judge_parts
from judgelab.analysis.stats import CI_LEVEL, CIRule, resample_weights
from tests.unit.test_signal_fidelity import audit

RULE = CIRule(5, 300, 0, CI_LEVEL)
# docs/METRICS.md: a mixed group (A, B pass; C, D fail) and a group where all four fail
MIXED = ([True, True, False, False], [0.9, 0.5, 0.5, 0.8])
ALL_FAIL = ([False] * 4, [0.2, 0.6, 0.6, 0.4])


def parts(passed, scores, convention="std", n_boot=0, expected=0.5):  # type: ignore[no-untyped-def]
    truth, cand = audit(passed, scores)
    weights = resample_weights(len(truth.tasks), n_boot, 0)
    rule = CIRule(RULE.min_ci_groups, n_boot, 0, CI_LEVEL)
    return judge_parts(cand, truth, weights, rule, convention, expected)


def sf(passed, scores, convention="std"):  # type: ignore[no-untyped-def]
    truth, cand = audit(passed, scores)
    return truth_metrics(cand, truth, 0.8, None, RULE, convention)["signal_fidelity"]


def test_the_worked_example_under_std() -> None:
    got = parts(*zip(MIXED, ALL_FAIL, strict=True))
    # the group's advantage fidelity (the doc's 0.14) and a full unit of noise
    assert got["alignment"] == pytest.approx(0.1397, abs=1e-3)
    assert got["noise"] == pytest.approx(1.0)
    assert got["at_expected"]["signal_fidelity"] == pytest.approx(0.1397 / 2, abs=1e-3)
    assert (got["n_split_groups"], got["n_unsplit_groups"]) == (1, 1)


def test_the_worked_example_centred_by_hand() -> None:
    """Centred: judge a = (.225, -.175, -.175, .125), tests b = (.5, .5, -.5, -.5):
    c = .05 / 4, the tests' push .25, so alignment .05; the all-fail group's push is
    mean((-.25, .15, .15, -.05)^2) = .0275, noise .0275 / .25 = .11; SF = .0125 / .2775."""
    got = parts(*zip(MIXED, ALL_FAIL, strict=True), convention="centred")
    assert got["alignment"] == pytest.approx(0.05)
    assert got["noise"] == pytest.approx(0.11)
    assert got["at_expected"]["signal_fidelity"] == pytest.approx(0.0125 / 0.2775)
    assert sf(*zip(MIXED, ALL_FAIL, strict=True), convention="centred") == pytest.approx(
        0.0125 / 0.2775
    )


@pytest.mark.parametrize("noisy", [[0.50, 0.50, 0.50, 0.51], [0.0, 1.0, 0.0, 1.0]])
def test_the_noise_charge_follows_the_convention(noisy: list[float]) -> None:
    """Under std any uneven all-fail group costs 1; centred, its variance over the tests'
    push (.25): 1.875e-5 / .25 for the nearly flat one, .25 / .25 for [0, 1, 0, 1]."""
    passed, scores = [MIXED[0], [False] * 4], [MIXED[1], noisy]
    assert parts(passed, scores)["noise"] == pytest.approx(1.0)
    centred = parts(passed, scores, "centred")["noise"]
    assert centred == pytest.approx(float(np.var(noisy)) / 0.25)


def test_a_judge_that_is_the_tests_at_half_size() -> None:
    """Scores 0.5 · passed: the tests' direction at half the push. std cannot tell (1);
    centred gives half the signal (Dr. GRPO takes half the step)."""
    passed = [[True, False, False, True], [True, True, False, True], [False] * 4]
    scores = [[0.5 * p for p in ps] for ps in passed]
    assert sf(passed, scores) == pytest.approx(1.0)
    assert sf(passed, scores, "centred") == pytest.approx(0.5)
    assert sf(passed, scores, "batch") == pytest.approx(1.0)  # one scale for all: undone


def _random_audit(seed: int, n: int = 40, k: int = 4) -> tuple[list, list]:
    rng = np.random.default_rng(seed)
    passed = [list(rng.random(k) < rng.uniform(0.1, 0.9)) for _ in range(n)]
    scores = [
        [None if rng.random() < 0.1 else float(np.round(rng.random(), 1)) for _ in range(k)]
        for _ in range(n)
    ]
    return passed, scores


@pytest.mark.parametrize("convention", ["std", "centred", "batch"])
def test_at_the_audits_own_share_it_is_the_audits_signal_fidelity(convention: str) -> None:
    passed, scores = _random_audit(1)
    got = parts(passed, scores, convention, n_boot=200)
    own = got["n_split_groups"] / (got["n_split_groups"] + got["n_unsplit_groups"])
    again = fidelity_at(own, got["alignment"], got["noise"])
    assert float(again) == pytest.approx(sf(passed, scores, convention), abs=1e-12)
    low, high = got["alignment_ci_low"], got["alignment_ci_high"]
    assert low is not None and low <= got["alignment"] <= high
    assert [row["share"] for row in got["curve"]] == list(SHARES)


def test_alignment_and_noise_by_an_independent_definition() -> None:
    """Written out from the docstring with plain Python, task by task (std convention)."""
    passed, scores = _random_audit(2)
    num = push_split = push_unsplit = 0.0
    n_split = n_unsplit = 0
    for ps, ss in zip(passed, scores, strict=True):
        given = [s for s in ss if s is not None]
        mean = sum(given) / len(given) if given else 0.0
        sd = (sum((s - mean) ** 2 for s in given) / len(given)) ** 0.5 if given else 0.0
        a = [0.0 if s is None or sd <= 1e-9 else (s - mean) / sd for s in ss]
        share = sum(ps) / len(ps)
        if 0 < share < 1:
            b = [(float(p) - share) / (share * (1 - share)) ** 0.5 for p in ps]
            num += sum(x * y for x, y in zip(a, b, strict=True)) / len(ps)
            push_split += 1.0
            n_split += 1
        else:
            push_unsplit += sum(x * x for x in a) / len(ps)
            n_unsplit += 1
    got = parts(passed, scores)
    assert got["alignment"] == pytest.approx(num / push_split)
    assert got["noise"] == pytest.approx((push_unsplit / n_unsplit) / (push_split / n_split))


def test_too_few_groups_give_no_interval() -> None:
    got = parts(*zip(MIXED, ALL_FAIL, strict=True), n_boot=100)
    assert got["alignment_ci_low"] is None and got["noise_ci_high"] is None
    assert all(row["ci_low"] is None for row in got["curve"])


def test_the_crossing_share_of_issue_63() -> None:
    """Alignment 0.189 / noise 0.77 against 0.166 / 0.62 swap order near a split share of
    0.30 (issue 63; 0.316 from these rounded parts, 0.309 from the reference's own): by hand,
    D = .189 · .62 − .166 · .77 = −.01064 and s = D / (D − .189 + .166) = .01064 / .03364.
    The curves meet there and change order across it."""
    s = crossing(0.189, 0.77, 0.166, 0.62)
    assert s == pytest.approx(0.01064 / 0.03364)
    assert fidelity_at(s, 0.189, 0.77) == pytest.approx(fidelity_at(s, 0.166, 0.62))
    assert fidelity_at(s - 0.05, 0.189, 0.77) < fidelity_at(s - 0.05, 0.166, 0.62)
    assert fidelity_at(s + 0.05, 0.189, 0.77) > fidelity_at(s + 0.05, 0.166, 0.62)
    assert crossing(0.3, 0.5, 0.1, 0.5) is None  # same noise: never cross


# ----------------------------------------------------------------------------- the report


def _block(crossing_share: float = 0.31, own: bool = True) -> dict:
    def judge(a: float, n: float) -> dict:
        curve = [{"share": s, "signal_fidelity": float(fidelity_at(s, a, n)), "ci_low": None,
                  "ci_high": None} for s in SHARES]  # fmt: skip
        e = 74 / 164 if own else 0.2
        at = {"share": e, "signal_fidelity": float(fidelity_at(e, a, n)), "ci_low": 0.01,
              "ci_high": 0.2}  # fmt: skip
        return {"alignment": a, "noise": n, "alignment_ci_low": None, "alignment_ci_high": None,
                "noise_ci_low": None, "noise_ci_high": None, "n_split_groups": 74,
                "n_unsplit_groups": 90, "curve": curve, "at_expected": at}  # fmt: skip

    judges = {"rubric": judge(0.189, 0.77), "ruler": judge(0.166, 0.62)}
    from judgelab.analysis.split_share import first_by_share

    return {"convention": "std", "own_share": 74 / 164, "expected_share": 74 / 164 if own else 0.2,
            "expected_is_own": own, "n_split_groups": 74, "n_unsplit_groups": 90,
            "shares": list(SHARES), "judges": judges, "first_by_share": first_by_share(judges),
            "crossings": [{"judges": ["rubric", "ruler"], "share": crossing_share}]}  # fmt: skip


def test_the_sentences_are_the_blocks_figures() -> None:
    from judgelab.report.split_share import sentences, split_share_section

    text = " ".join(sentences(_block()))
    assert "n = 74 tasks" in text and "n = 90 tasks" in text and "0.451 (74 of 164" in text
    assert "ruler at 0.1–0.3; rubric at 0.4–0.9" in text  # from first_by_share
    assert "swap order at a split share of 0.31" in text
    assert "At this audit's own split share, 0.451, rubric ranks first" in text
    assert "swap order at a split share of 0.27" in " ".join(sentences(_block(0.27)))
    other = " ".join(sentences(_block(own=False)))
    assert "expected share you set" in other and "0.200, ruler ranks first" in other
    section = split_share_section({"split_share": _block()})[0]
    assert "| rubric | 0.189, n = 74 | 0.770, n = 90 |" in section.markdown
    assert split_share_section({"split_share": {"reason": "no split tasks"}}) == []
