"""What starts flows: the `judgelab` command line (one sub-command per module; the stage
commands come from the stage table, flows.stages) and the Prefect deployment (deploy.py).

It sits above both packages it imports: `judgelab` (the library) and `flows` (one Prefect
flow per stage). Neither imports it, and `judgelab` never imports `flows`
(tests/unit/test_layering.py).
"""

from judgelab_cli.main import app

__all__ = ["app"]
