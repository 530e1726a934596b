"""What starts flows: the `judgelab` command line (one sub-command per module; the stage
commands come from the stage table, judgelab.flows.stages) and the Prefect deployment
(deploy.py).

It sits above both things it imports: `judgelab` (the library) and `judgelab.flows` (one
Prefect flow per stage, shipped inside the judgelab package). Neither imports it, and no
other judgelab module imports `judgelab.flows` (tests/unit/test_layering.py).
"""

from judgelab_cli.main import app

__all__ = ["app"]
