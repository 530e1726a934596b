"""docs/ENDPOINTS.md's token figures are the committed reference probes' judge calls
(reference/data/probes/calls.parquet), and its cost example is their arithmetic."""

from __future__ import annotations

from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "ENDPOINTS.md").read_text()
DOC_FLAT = " ".join(DOC.split())
CALLS = pl.read_parquet(ROOT / "reference" / "data" / "probes" / "calls.parquet")
RULER = CALLS.filter(pl.col("evaluator").str.starts_with("ruler-qwen"))
RUBRIC = CALLS.filter(pl.col("evaluator") == "rubric-qwen-1.5b")


def test_token_figures_are_the_reference_probes_calls() -> None:
    per_judge = RULER.group_by("evaluator").len()["len"].to_list()
    assert len(per_judge) == 2 and len(set(per_judge)) == 1
    assert f"{per_judge[0]} calls per RULER judge" in DOC_FLAT
    assert f"({RUBRIC.height:,} calls, one candidate each)" in DOC_FLAT
    for calls in (RULER, RUBRIC):
        prompt, completion = calls["prompt_tokens"], calls["completion_tokens"]
        assert f"{int(prompt.median()):,} prompt tokens at the median" in DOC_FLAT
        assert f"({prompt.min():,}–{prompt.max():,})" in DOC_FLAT
        assert (
            f"{int(completion.median())} completion tokens at the median "
            f"(at most {completion.max()})"
        ) in DOC_FLAT


def test_the_cost_example_is_its_arithmetic() -> None:
    """500 tasks of k = 4: 500 RULER calls or 2,000 rubric calls at the medians above."""
    assert "price_per_million_prompt_tokens: 0.10" in DOC
    assert "price_per_million_completion_tokens: 0.30" in DOC
    ruler_calls = 500
    for calls, table, digits in ((ruler_calls, RULER, 2), (ruler_calls * 4, RUBRIC, 2)):
        prompt = calls * int(table["prompt_tokens"].median()) / 1e6
        completion = calls * int(table["completion_tokens"].median()) / 1e6
        assert f"{prompt:.1f} million prompt" in DOC_FLAT
        assert f"{completion:.{digits}f} million completion" in DOC_FLAT
        assert f"${prompt * 0.10:.2f} + ${completion * 0.30:.2f}" in DOC_FLAT
    assert f"about {ruler_calls} calls" in DOC_FLAT
    assert f"makes {ruler_calls * 4:,} calls" in DOC_FLAT
