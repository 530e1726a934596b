"""The decision an audit supports, from its figures (pure: reads the metrics dict).

- The rulebook (`metrics["rulebook"]`, `analysis.rulebook`: docs/METRICS.md "A rule for
  rejecting a judge", rules 1-6) is applied whole: each rule is a one-sided test at
  alpha / 2, Holm-corrected over the judges; a judge any rule rejects is never the decision,
  whatever its rank. `rejected` names, per judge, each rule that rejected it with its test.
- Rule 7 (the rulebook's `parseable`): a judge whose primary is not shown above chance on
  candidates whose code parses is never recommended as a reward on its own: the signal it
  would keep once the policy writes code that parses is not established. Where rule 7 alone
  rejects a judge and its figure there is exactly 0 (a syntax or format check), the judge
  is a format gate (`format_gates`), listed apart from `rejected`: its whole signal comes
  from code that does not parse.
- The tests: where the audit has execution truth, the tests are the reference every judge is
  measured against (their own signal fidelity is 1). `tests_beat` lists the judges whose
  primary's CI lies wholly below the tests' value; the others cannot be told from the tests.
- Without tests, the judge to use is an acceptable judge placed above every other one by the
  Holm-corrected pairs (`ranking.rank_judges`). Where several could each be first
  (`contenders`), each pair of them gets one verdict at the margin (`analysis.margin`):
  "above" (Holm-separated), "equivalent" (TOST within the margin, Holm over the same pairs)
  or "undecided", with the shared tasks that would decide it at the margin
  (`power.pairs[..]["tasks_to_decide"]`), never at the observed gap. Every contender pair
  equivalent: verdict "equivalent" (any of them will do); otherwise "cannot_tell".

`decide(metrics)` returns:
  {"primary", "chance", "margin", "tests", "tests_beat", "verdict": "judge" | "equivalent" |
   "cannot_tell" | "no_judge" | "no_ranking", "judge", "acceptable": [rank order],
   "contenders", "rejected": {judge: {rule: test}}, "format_gates": {judge: test},
   "pairs": [{"a", "b", "verdict", "difference", "difference_ci_low", "difference_ci_high",
   "n_groups", "p_holm", "p_equivalence_holm", "tasks_to_decide"}]}
"""

from __future__ import annotations

import itertools
from typing import Any

from judgelab.analysis.power import pair
from judgelab.analysis.ranking import CHANCE, rank_judges

# The value of the primary for a reward that gives exactly the tests' signal.
TESTS_VALUE = {"signal_fidelity": 1.0, "advantage_fidelity": 1.0, "pairwise_accuracy_strict": 1.0}
ZERO = 1e-9  # a figure this close to 0 is exactly 0 (every candidate of a task scored alike)
# What the decision records of each pair of contenders.
PAIR_FIELDS = ("difference", "difference_ci_low", "difference_ci_high", "n_groups", "p_holm",
               "p_equivalence_holm", "tasks_to_decide")  # fmt: skip


def rejections(metrics: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each judge's rules that reject it as a reward on its own, with their tests (empty:
    acceptable). A judge the rulebook has no chance test for is rejected by rule 1: nothing
    shows it above chance."""
    tests = (metrics.get("rulebook") or {}).get("judges") or {}
    out: dict[str, dict[str, Any]] = {}
    for name, ev in sorted((metrics.get("evaluators") or {}).items()):
        if ev.get("protocol") == "execution":
            continue
        got = tests.get(name) or {}
        why = {rule: t for rule, t in got.items() if t.get("rejects")}
        if "chance" not in got:
            why["chance"] = {"value": None, "n": 0, "p": None, "p_holm": None, "rejects": True}
        out[name] = why
    return out


def format_gates(rejected: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The judges rule 7 alone rejects and whose primary on parseable code is exactly 0 (a
    syntax or format check: every parseable candidate of a task scored alike), with that
    test: a format gate, never the reward alone."""
    return {
        n: why["parseable"]
        for n, why in rejected.items()
        if set(why) == {"parseable"} and abs(why["parseable"].get("value") or 0.0) < ZERO
    }


def pair_verdict(power: dict[str, Any], a: str, b: str) -> dict[str, Any]:
    """One pair's verdict at the margin, oriented a - b (module docstring)."""
    p = pair(power, a, b) or {}
    if p.get("separated") and p.get("difference") is not None:
        verdict = "above" if p["difference"] > 0 else "below"
    else:
        verdict = "equivalent" if p.get("equivalent") else "undecided"
    return {"a": a, "b": b, "verdict": verdict, **{k: p.get(k) for k in PAIR_FIELDS}}


def decide(metrics: dict[str, Any]) -> dict[str, Any]:
    """The decision (module docstring)."""
    rank = rank_judges(metrics)
    key = rank["endpoint"]
    rejected = rejections(metrics)
    gates = format_gates(rejected)
    evs = metrics.get("evaluators") or {}
    has_truth = bool((metrics.get("execution_truth") or {}).get("n_tasks_with_truth"))
    tests = TESTS_VALUE.get(key) if has_truth else None
    highs = {n: (evs[n].get("truth") or {}).get(f"{key}_ci_high") for n in rank["order"]}
    tests_beat = [n for n, high in highs.items() if None not in (tests, high) and high < tests]
    acceptable = [n for n in rank["order"] if not rejected.get(n)]
    above = set(rank["separated"])
    # an acceptable judge could be first unless another acceptable judge is above it
    contenders = [n for n in acceptable if not any((o, n) in above for o in acceptable)]
    power = metrics.get("power") or {}
    pairs = [pair_verdict(power, a, b) for a, b in itertools.combinations(contenders, 2)]
    out: dict[str, Any] = {
        "primary": key, "chance": CHANCE.get(key, 0.5), "margin": power.get("margin"),
        "tests": tests, "tests_beat": tests_beat, "judge": None, "acceptable": acceptable,
        "contenders": contenders,
        "rejected": {n: why for n, why in rejected.items() if why and n not in gates},
        "format_gates": gates,
        "pairs": pairs,
    }  # fmt: skip
    if not rank["order"]:
        out["verdict"] = "no_ranking"
    elif not acceptable:
        out["verdict"] = "no_judge"
    elif len(contenders) == 1:  # every other acceptable judge is below it, through a chain
        out["verdict"], out["judge"] = "judge", contenders[0]
    elif all(p["verdict"] == "equivalent" for p in pairs):
        out["verdict"] = "equivalent"
    else:
        out["verdict"] = "cannot_tell"
    return out
