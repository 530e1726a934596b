"""Rank intervals of the judges from the paired comparisons (pure: reads the metrics dict).

- Criterion: the primary endpoint `power.endpoint` (`analysis.primary`: signal fidelity over
  every task with test results, the pairwise figures on mixed tasks; truth module).
  Judges are the evaluators other than the execution truth; a judge without the
  primary figure is listed apart, unranked.
- Rank intervals, not tiers: a judge's best possible rank is 1 + the number of judges above
  it, its worst n - the number below it (n ranked judges), where "above" is a separated pair
  (`power.pairs[a][b].separated`: Holm-adjusted p < alpha over every pair) or a chain of them
  (x above a and a above b put x above b: under family-wise control all separations hold at
  once). Then a pair with no such order always has overlapping intervals, and a separated
  pair's better judge has both ends strictly better, so the rank column cannot contradict
  the pair table (and no tie is chained).
- Top contenders: the judges whose best rank is 1.

`judgelab.report.ranking` turns this into the recommendation and the caveat table.
"""

from __future__ import annotations

from typing import Any

from judgelab.analysis.fidelity import NOISE_COUNTED
from judgelab.analysis.power import LABELS, pair

# What a judge that guesses gets (the strict pairwise accuracy's 0.5 only for one that never ties)
CHANCE = {"signal_fidelity": 0.0, "pairwise_accuracy_strict": 0.5, "pairwise_accuracy": 0.5,
          "advantage_fidelity": 0.0, "top1_over_chance": 0.0}  # fmt: skip


DEFAULT_ENDPOINT = "pairwise_accuracy_strict"  # what a metrics.json without one was ranked by


def chance_caveat(t: dict[str, Any], key: str) -> str | None:
    """Why a judge's figure `key` (its truth figures `t`) is not shown above chance: it has no
    figure, no CI, or a CI that reaches the chance level; None when its CI lies above."""
    low = t.get(f"{key}_ci_low")
    if t.get(key) is None:
        return "no figure"
    if low is None:
        return f"no CI (n = {t.get(f'{key}_n_groups')})"
    if low <= CHANCE.get(key, 0.5):
        return f"CI reaches {CHANCE.get(key, 0.5):g}"
    return None


def endpoint(metrics: dict[str, Any]) -> str:
    power = metrics.get("power") or {}
    settings = metrics.get("settings") or {}
    return str(power.get("endpoint") or settings.get("primary") or DEFAULT_ENDPOINT)


def _separated(power: dict[str, Any], a: str, b: str) -> int:
    """+1 when a is separated above b, -1 below, 0 when not separated."""
    p = pair(power, a, b)
    if not p or not p.get("separated") or p.get("difference") is None:
        return 0
    return 1 if p["difference"] > 0 else -1


def _closure(order: list[str], separated: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Every (a, b) with a above b directly or through a chain of separated pairs: under
    Holm's family-wise control all separations hold at once, so their chains do too."""
    above = set(separated)
    for k in order:
        for i in order:
            for j in order:
                if (i, k) in above and (k, j) in above:
                    above.add((i, j))
    return above


def rank_judges(metrics: dict[str, Any]) -> dict[str, Any]:
    """{"endpoint", "criterion", "order": ranked judges by value (best first, then name),
    "ranks": {judge: (best, worst)}, "top": contenders, "separated": [(above, below)],
    "unranked": [judge, ...]}."""
    evs = metrics.get("evaluators") or {}
    power = metrics.get("power") or {}
    key = endpoint(metrics)
    judges = sorted(n for n, ev in evs.items() if ev.get("protocol") != "execution")
    value = {n: (evs[n].get("truth") or {}).get(key) for n in judges}
    order = sorted((n for n in judges if value[n] is not None), key=lambda n: (-value[n], n))
    separated = [(a, b) for a in order for b in order if a != b and _separated(power, a, b) > 0]
    above = _closure(order, separated)
    ranks = {
        n: (1 + sum(1 for _, b in above if b == n), len(order) - sum(1 for a, _ in above if a == n))
        for n in order
    }
    return {
        "endpoint": key,
        "criterion": f"{LABELS.get(key, key)} "
        + ("over every task with test results" if key in NOISE_COUNTED else "on mixed tasks"),
        "order": order,
        "ranks": ranks,
        "top": [n for n in order if ranks[n][0] == 1],
        "separated": separated,
        "unranked": [n for n in judges if value[n] is None],
    }
