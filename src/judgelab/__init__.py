"""judgelab: audit the evaluators used as rewards when RL trains code models."""

__version__ = "0.1.0"
