"""The worst false praise: failing candidates a judge scored at or above the praise threshold,
with the judge's explanation, why the tests failed and an excerpt of the code."""

from __future__ import annotations

from typing import Any

import polars as pl

from judgelab.analysis.truth import Truth

EXCERPT_LINES = 40


EXCERPT_CHARS = 2000


EXPLANATION_CHARS = 600


def excerpt(text: str | None) -> str:
    """The first EXCERPT_LINES lines / EXCERPT_CHARS characters, marked when cut."""
    if not text:
        return ""
    lines = text.splitlines()
    cut = "\n".join(lines[:EXCERPT_LINES])
    if len(cut) > EXCERPT_CHARS:
        cut = cut[:EXCERPT_CHARS]
    if cut != text.rstrip("\n") and cut != text:
        cut += "\n[... cut ...]"
    return cut


def worst_false_praise(
    scores: pl.DataFrame,
    rollouts: pl.DataFrame,
    truth: Truth,
    n: int = 5,
    threshold: float = 0.8,
) -> list[dict[str, Any]]:
    """The n highest-scored (row-level) failing candidates scored at or above the praise
    `threshold` by evaluators other than the execution truth — false praise, nothing less —
    with the judge's explanation, why the tests failed, and the completion from rollouts."""
    failing = truth.table.filter(pl.col("passed") == False).select("candidate_id")  # noqa: E712
    if not failing.height or not scores.height:
        return []
    why = (
        scores.filter(pl.col("evaluator") == truth.evaluator)
        .sort("repeat")
        .unique("candidate_id", keep="first")
        .select("candidate_id", pl.col("reason").alias("test_reason"))
    )
    rows = (
        scores.filter(
            (pl.col("status") == "scored")
            & (pl.col("protocol") != "execution")
            & (pl.col("score") >= threshold)
        )
        .join(failing, on="candidate_id", how="inner")
        .join(why, on="candidate_id", how="left")
        .sort(
            ["score", "evaluator", "candidate_id", "repeat"], descending=[True, False, False, False]
        )
        .head(n)
    )
    completions = rollouts.select("candidate_id", "completion") if rollouts.height else None
    out = []
    for row in rows.iter_rows(named=True):
        completion = None
        if completions is not None:
            hit = completions.filter(pl.col("candidate_id") == row["candidate_id"])
            completion = hit.get_column("completion")[0] if hit.height else None
        explanation = row.get("explanation") or ""
        if len(explanation) > EXPLANATION_CHARS:
            explanation = explanation[:EXPLANATION_CHARS] + " [... cut ...]"
        out.append(
            {
                "task_id": row["task_id"],
                "candidate_id": row["candidate_id"],
                "evaluator": row["evaluator"],
                "judge": row.get("judge"),
                "repeat": row["repeat"],
                "score": row["score"],
                "raw_score": row.get("raw_score"),
                "explanation": explanation,
                "test_reason": row.get("test_reason") or "",
                "code": excerpt(completion),
            }
        )
    return out
