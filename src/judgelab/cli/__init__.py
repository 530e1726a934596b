"""The `judgelab` command line: one sub-command per file in this package."""

from judgelab.cli.main import app

__all__ = ["app"]
