"""docs/ENDPOINTS.md's token figures are the committed reference probes' judge calls
(reference/data/probes/calls.parquet), and its cost example is their arithmetic."""

from __future__ import annotations

from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "ENDPOINTS.md").read_text()
DOC_FLAT = " ".join(DOC.split())


def test_token_figures_are_the_reference_probes_calls() -> None:
    calls = pl.read_parquet(ROOT / "reference" / "data" / "probes" / "calls.parquet")
    qwen = calls.filter(pl.col("evaluator").str.starts_with("ruler-qwen"))
    per_judge = qwen.group_by("evaluator").len()
    assert per_judge["len"].to_list() == [80, 80]
    prompt = qwen["prompt_tokens"]
    assert f"{int(prompt.median()):,} prompt tokens at the median" in DOC_FLAT
    assert f"({prompt.min():,}–{prompt.max():,})" in DOC_FLAT
    medians = qwen.group_by("evaluator").agg(pl.col("completion_tokens").median())
    assert all(abs(m - 220) <= 10 for m in medians["completion_tokens"])
    assert f"at most {qwen['completion_tokens'].max()}" in DOC_FLAT


def test_the_cost_example_is_its_arithmetic() -> None:
    calls, prompt, completion = 500, 1958, 220
    assert f"{calls} calls, {calls * prompt / 1e6:.1f} million prompt" in DOC_FLAT
    assert f"{calls * completion / 1e6:.2f} million completion" in DOC_FLAT
    money = f"${calls * prompt / 1e6 * 0.10:.2f} + ${calls * completion / 1e6 * 0.30:.2f}"
    assert money in DOC_FLAT
    assert "price_per_million_prompt_tokens: 0.10" in DOC
    assert "price_per_million_completion_tokens: 0.30" in DOC
    assert f"makes {calls * 4:,} calls" in DOC_FLAT
