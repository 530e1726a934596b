"""A judge-only audit: judges and no execution evaluator (tasks without tests, a team's own
prompts). Nothing can be ranked against the tests; what can be said is how the judges score
(the report's distribution table: unscored, out-of-range and zero-advantage rates) and how
far they agree with one another, which this module measures.

`judge_agreement(scores)` (None when an execution evaluator is present, or fewer than two
judges): over the candidates every judge scored (a judge's candidate score is the mean of
its scored repeats, `fidelity.candidate_scores`), Krippendorff's alpha (interval) of all judges,
and for each pair of judges Kendall's tau-b over the candidates both scored, each with its n.
Agreement is not accuracy: two judges can agree and both be wrong.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.agreement import kendall_tau_b, krippendorff_alpha_interval
from judgelab.analysis.fidelity import candidate_scores
from judgelab.config.evaluators import JUDGE_PROTOCOLS


def judge_agreement(scores: pl.DataFrame) -> dict[str, Any] | None:
    """Agreement between judges in a judge-only audit (module docstring)."""
    if scores.filter(pl.col("protocol") == "execution").height:
        return None
    judges = sorted(
        scores.filter(pl.col("protocol").is_in(JUDGE_PROTOCOLS))["evaluator"].unique().to_list()
    )
    if len(judges) < 2:
        return None
    per: dict[str, dict[str, float]] = {}
    for name in judges:
        cand = candidate_scores(scores, name).drop_nulls("score")
        per[name] = dict(zip(cand["candidate_id"], cand["score"], strict=True))
    candidates = sorted(set().union(*per.values()))
    data = np.array([[per[j].get(c, np.nan) for c in candidates] for j in judges], dtype=float)
    pairable = int((np.sum(~np.isnan(data), axis=0) >= 2).sum()) if candidates else 0
    pairs = []
    for a, b in itertools.combinations(judges, 2):
        both = sorted(set(per[a]) & set(per[b]))
        tau = kendall_tau_b([per[a][c] for c in both], [per[b][c] for c in both])
        pairs.append({"a": a, "b": b, "n_candidates": len(both), "kendall_tau_b": tau})
    return {
        "judges": judges,
        "krippendorff_alpha": krippendorff_alpha_interval(data) if candidates else None,
        "n_candidates": pairable,
        "pairs": pairs,
    }
