"""Evaluators: rule-based, execution-based (sandbox), LLM judges (RULER group, rubric)."""
