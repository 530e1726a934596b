"""The analysis stage's figures: which evaluator to trust, how each scores, and whether it
praises code that fails its tests. This package computes dicts and tables only
(`metrics.compute_metrics`, `metrics.audit_metrics`: what metrics.json holds); everything
that writes Markdown, HTML, plots or README blocks is in `judgelab.report`, which imports it.
Importing one module of it imports no other: each stage depends on the modules it uses.
"""
