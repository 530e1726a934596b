"""The decision an audit supports, from its figures (pure: reads the metrics dict).

- Rejection rules, fixed before the data (`analysis.reject`, docs/METRICS.md "A rule for
  rejecting a judge"): a judge is rejected when its primary has no valid CI or one that
  reaches the chance level, when it inverts at least as many pass/fail pairs as it gets right,
  when it gives a whole mixed group one score in more than `max_flat` of them, or when it
  leaves more than `max_unscored` of its rows unscored. A rejected judge is never the
  decision, whatever its rank.
- The tests: where the audit has execution truth, the tests are the reference every judge is
  measured against (their own signal fidelity is 1). `tests_beat` lists the judges whose
  primary's CI lies wholly below the tests' value; the others cannot be told from the tests.
- Without tests (tasks that have none), the judge to use is an acceptable judge placed above
  every other acceptable judge by the Holm-corrected pairs (`ranking.rank_judges`); where
  several acceptable judges could each be first, the decision is that they cannot be told
  apart, with the tasks the power analysis says would separate the first two.

`decide(metrics)` returns:
  {"primary", "chance", "tests": value of the tests' primary or None, "tests_beat": [...],
   "verdict": "judge" | "cannot_tell" | "no_judge" | "no_ranking",
   "judge": the judge to use or None, "acceptable": [judges no rule rejects, rank order],
   "contenders": [acceptable judges that could be first],
   "rejected": {judge: [reason, ...]}, "more_tasks": {"pair": [a, b], "needed", "have",
   "more"} or None}
"""

from __future__ import annotations

from typing import Any

from judgelab.analysis.power import pair
from judgelab.analysis.ranking import CHANCE, chance_caveat, rank_judges
from judgelab.config import RejectSettings

# The value of the primary for a reward that gives exactly the tests' signal.
TESTS_VALUE = {"signal_fidelity": 1.0, "advantage_fidelity": 1.0, "pairwise_accuracy_strict": 1.0}


def rejections(metrics: dict[str, Any], key: str) -> dict[str, list[str]]:
    """Each judge's broken rejection rules (empty list: acceptable), by the settings' limits."""
    rules = RejectSettings.model_validate((metrics.get("settings") or {}).get("reject") or {})
    max_flat, max_unscored = rules.max_flat, rules.max_unscored
    out: dict[str, list[str]] = {}
    for name, ev in sorted((metrics.get("evaluators") or {}).items()):
        if ev.get("protocol") == "execution":
            continue
        t = ev.get("truth") or {}
        chance = chance_caveat(t, key)
        why = [] if chance is None else [chance]
        right, inverted = t.get("right_pair_rate"), t.get("inverted_pair_rate")
        if right is not None and inverted is not None and inverted >= right:
            why.append("inverts at least as many pairs as it gets right")
        flat = t.get("zero_advantage_mixed_rate")
        if flat is not None and flat > max_flat:
            why.append(f"one score for a whole mixed group in more than {max_flat:.0%} of them")
        unscored = ev.get("unscored_rate")
        if unscored is not None and unscored > max_unscored:
            why.append(f"more than {max_unscored:.0%} of its rows unscored")
        out[name] = why
    return out


def _more_tasks(metrics: dict[str, Any], a: str, b: str) -> dict[str, Any] | None:
    p = pair(metrics.get("power") or {}, a, b)
    if not p:
        return None
    needed = p.get("groups_needed_observed") or p.get("groups_needed_margin")
    if needed is None:
        return None
    have = int(p.get("n_groups") or 0)
    return {"pair": [a, b], "needed": int(needed), "have": have, "more": max(0, needed - have)}


def decide(metrics: dict[str, Any]) -> dict[str, Any]:
    """The decision (module docstring)."""
    rank = rank_judges(metrics)
    key = rank["endpoint"]
    rejected = rejections(metrics, key)
    evs = metrics.get("evaluators") or {}
    has_truth = bool((metrics.get("execution_truth") or {}).get("n_tasks_with_truth"))
    tests = TESTS_VALUE.get(key) if has_truth else None
    highs = {n: (evs[n].get("truth") or {}).get(f"{key}_ci_high") for n in rank["order"]}
    tests_beat = [n for n, high in highs.items() if None not in (tests, high) and high < tests]
    acceptable = [n for n in rank["order"] if not rejected.get(n)]
    above = set(rank["separated"])
    # an acceptable judge could be first unless another acceptable judge is above it
    contenders = [n for n in acceptable if not any((o, n) in above for o in acceptable)]
    out: dict[str, Any] = {
        "primary": key,
        "chance": CHANCE.get(key, 0.5),
        "tests": tests,
        "tests_beat": tests_beat,
        "judge": None,
        "acceptable": acceptable,
        "contenders": contenders,
        "rejected": {n: why for n, why in rejected.items() if why},
        "more_tasks": None,
    }
    if not rank["order"]:
        out["verdict"] = "no_ranking"
    elif not acceptable:
        out["verdict"] = "no_judge"
    elif len(contenders) == 1:  # every other acceptable judge is below it, through a chain
        out["verdict"], out["judge"] = "judge", contenders[0]
    else:
        out["verdict"] = "cannot_tell"
        if len(contenders) >= 2:
            out["more_tasks"] = _more_tasks(metrics, contenders[0], contenders[1])
    return out
