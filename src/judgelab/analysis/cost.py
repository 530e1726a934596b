"""Cost per correct verdict: what a judge spends for each pass/fail pair it orders correctly.

Inputs: the probe calls table (`judgelab.schemas.ProbeCallsSchema`: tokens and reply latency
per attempt, as the judge cache records them) and one judge's probe scores rows. The calls
counted are those of the identity view ``perm:0`` (repeat 0) of every known-truth group — one
RULER call per group, one rubric call per candidate, retries included: the judge scoring a
group as a reward would. A *correct verdict* is a pass/fail pair of that view (the canonical
solution against a mutant or non-answer the tests reject) whose passing member scored strictly
higher; a tie, or a pair with an unscored member, is not correct, and its call still costs.

Deterministic figures (`cost_metrics`, into metrics.json; CIs over groups, as every figure):
- ``tokens_per_correct_pair``: (prompt + completion tokens) / correct pairs;
- ``money_per_1000_correct_pairs``: for an endpoint with both prices in the model registry
  (per million tokens, in the registry's currency): 1000 x (prompt tokens x prompt price +
  completion tokens x completion price) / 1e6 / correct pairs (per thousand: metrics.json
  keeps 6 decimals).
Timings (`cost_timings`, the report only: they differ between identical runs):
- ``seconds_per_correct_pair``: the replies' latency (of the request that made each reply,
  cached with it) / correct pairs;
- ``cpu_seconds_per_correct_pair``, embedded judges: that times the server's ``n_threads``
  (llama.cpp keeps every thread busy for the whole call; an upper bound on CPU time).
Both also give the whole probe run's calls, tokens and seconds per judge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from judgelab.analysis.intervals import figure_with_ci
from judgelab.analysis.probe_views import PERM
from judgelab.analysis.stats import CIRule
from judgelab.config import EmbeddedModel, Settings

IDENTITY = f"{PERM}0"


@dataclass(frozen=True)
class JudgeCosting:
    """What one judge's model costs: embedded (CPU threads) or an endpoint (prices)."""

    model: str
    kind: str  # embedded | endpoint
    n_threads: int | None = None
    price_prompt: float | None = None  # per million tokens
    price_completion: float | None = None


def judge_costing(settings: Settings) -> dict[str, JudgeCosting]:
    """evaluator name -> its judge model's costing, for the probed judges."""
    out = {}
    for name in settings.probes.judges:
        model = settings.evaluator(name).judge_model
        spec = settings.models[model]
        if isinstance(spec, EmbeddedModel):
            out[name] = JudgeCosting(model, "embedded", n_threads=settings.server.n_threads)
        else:
            out[name] = JudgeCosting(
                model,
                "endpoint",
                price_prompt=spec.price_per_million_prompt_tokens,
                price_completion=spec.price_per_million_completion_tokens,
            )
    return out


def _groups(calls: pl.DataFrame, rows: pl.DataFrame) -> list[dict[str, float]]:
    """Per known-truth group: its identity call(s)' tokens and latency, and its pass/fail
    pairs, correct or not."""
    ident = rows.filter(
        (pl.col("probe") == "calibration") & (pl.col("view") == IDENTITY) & (pl.col("repeat") == 0)
    )
    mine = calls.filter((pl.col("view") == IDENTITY) & (pl.col("repeat") == 0))
    parts = []
    for g in sorted(ident["group_id"].unique().to_list()):
        members = ident.filter(pl.col("group_id") == g)
        scores = {
            r["candidate_id"]: (r["score"] if r["status"] == "scored" else None, r["passed"])
            for r in members.iter_rows(named=True)
        }
        passing = [s for s, ok in scores.values() if ok is True]
        failing = [s for s, ok in scores.values() if ok is False]
        c = mine.filter(pl.col("group_id") == g)
        lat = c["reply_latency_s"]
        parts.append(
            {
                "calls": float(c.height),
                "prompt": float(c["prompt_tokens"].fill_null(0).sum()),
                "completion": float(c["completion_tokens"].fill_null(0).sum()),
                "no_tokens": float(
                    c.filter(
                        pl.col("prompt_tokens").is_null() | pl.col("completion_tokens").is_null()
                    ).height
                ),
                "seconds": float(lat.fill_null(0).sum()),
                "no_latency": float(lat.null_count()),
                "pairs": float(len(passing) * len(failing)),
                "correct": float(
                    sum(p is not None and f is not None and p > f for p in passing for f in failing)
                ),
            }
        )
    return parts


def _per_correct(parts: list[dict[str, float]], cost: Any) -> Any:
    """stat(idx) = sum of cost(part) / sum of correct pairs over the groups idx."""

    def stat(idx: np.ndarray) -> float | None:
        correct = sum(parts[i]["correct"] for i in idx)
        return float(sum(cost(parts[i]) for i in idx) / correct) if correct else None

    return stat


def _totals(calls: pl.DataFrame) -> dict[str, Any]:
    return {
        "n_calls": calls.height,
        "prompt_tokens": int(calls["prompt_tokens"].fill_null(0).sum()),
        "completion_tokens": int(calls["completion_tokens"].fill_null(0).sum()),
    }


def cost_metrics(
    calls: pl.DataFrame,
    rows: pl.DataFrame,
    costing: JudgeCosting,
    rule: CIRule,
) -> dict[str, Any]:
    """The deterministic cost figures of one judge (module docstring); `calls` and `rows`
    are that judge's."""
    parts = _groups(calls, rows)
    n = len(parts)
    out: dict[str, Any] = {
        "judge_model": costing.model,
        "kind": costing.kind,
        "n_groups": n,
        "n_identity_calls": int(sum(p["calls"] for p in parts)),
        "n_pass_fail_pairs": int(sum(p["pairs"] for p in parts)),
        "n_correct_pairs": int(sum(p["correct"] for p in parts)),
        "price_per_million_prompt_tokens": costing.price_prompt,
        "price_per_million_completion_tokens": costing.price_completion,
        "probe_run": _totals(calls),
    }
    reasons: dict[str, str] = {}
    no_tokens = int(sum(p["no_tokens"] for p in parts))
    if no_tokens:
        out.update(tokens_per_correct_pair=None, money_per_1000_correct_pairs=None)
        why = f"{no_tokens} identity calls have no token counts (the endpoint reported none)"
        reasons.update(tokens_per_correct_pair=why, money_per_1000_correct_pairs=why)
    else:
        tokens = _per_correct(parts, lambda p: p["prompt"] + p["completion"])
        out.update(figure_with_ci("tokens_per_correct_pair", n, tokens, rule))
        if costing.price_prompt is not None and costing.price_completion is not None:
            pp, pc = costing.price_prompt, costing.price_completion
            money = _per_correct(parts, lambda p: (p["prompt"] * pp + p["completion"] * pc) / 1e3)
            out.update(figure_with_ci("money_per_1000_correct_pairs", n, money, rule))
        else:
            out["money_per_1000_correct_pairs"] = None
            reasons["money_per_1000_correct_pairs"] = (
                "embedded model: no price (see the CPU-seconds)"
                if costing.kind == "embedded"
                else f"models.{costing.model} has no price_per_million_prompt_tokens and "
                "price_per_million_completion_tokens"
            )
    if not out["n_correct_pairs"]:
        for key in ("tokens_per_correct_pair", "money_per_1000_correct_pairs"):
            if out.get(key) is None:
                reasons.setdefault(key, "no correctly ordered pass/fail pair")
    out["reasons"] = reasons
    return out


def cost_timings(calls: pl.DataFrame, rows: pl.DataFrame, costing: JudgeCosting) -> dict[str, Any]:
    """The time figures of one judge (module docstring): for the report, never metrics.json."""
    parts = _groups(calls, rows)
    correct = sum(p["correct"] for p in parts)
    missing = int(sum(p["no_latency"] for p in parts))
    seconds = sum(p["seconds"] for p in parts)
    out: dict[str, Any] = {
        "seconds_per_correct_pair": None,
        "cpu_seconds_per_correct_pair": None,
        "probe_run_seconds": float(calls["reply_latency_s"].fill_null(0).sum()),
        "probe_run_calls_without_latency": int(calls["reply_latency_s"].null_count()),
        "reason": None,
    }
    if missing:
        out["reason"] = (
            f"{missing} identity calls have no recorded latency (cached before judgelab "
            "recorded it)"
        )
    elif not correct:
        out["reason"] = "no correctly ordered pass/fail pair"
    else:
        out["seconds_per_correct_pair"] = seconds / correct
        if costing.kind == "embedded" and costing.n_threads:
            out["cpu_seconds_per_correct_pair"] = seconds * costing.n_threads / correct
    return out
