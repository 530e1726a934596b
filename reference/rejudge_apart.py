"""Judge the reference audit's groups apart (issue 46, item 6), resumably, in a scratch project.

The committed tables were judged with each task's natural group and contrast group in one
call (`scores.populations: together`); the re-run judges them apart. Until every call is in
`reference/.cache/judge`, reference/params.yaml keeps saying `together` (what the committed
tables are), so the calls are made here, in a scratch project: reference/params.yaml with
`scores.populations: apart` and the RULER judges as its only evaluators (execution, the rule
checks and the pointwise rubric need no new call: a rubric call sees one candidate, whatever
the grouping), the committed tasks and rollouts tables, and the reference's own cache.
The scores stage goes judge by judge (evaluator-major) and, within a judge, task by task,
a task's natural group just before its contrast group: the two calls share the policy's
messages, which llama.cpp keeps from the first call.

    .venv/bin/python reference/rejudge_apart.py /tmp/rejudge          # writes the project
    cd /tmp/rejudge && JUDGELAB_CACHE=<checkout>/reference/.cache \\
        <checkout>/.venv/bin/judgelab scores -p params.yaml               # resumable
    git add reference/.cache/judge && git commit                         # after each stop

Once every call is a cache hit, the re-run proper is `dvc repro --single-item
reference/dvc.yaml:scores` with `populations: apart` in reference/params.yaml
(reference/PLAN.md).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def scratch_params(params: dict) -> dict:
    """reference/params.yaml, its groups judged apart by its RULER judges only."""
    out = dict(params)
    ruler = [e for e in params["scores"]["evaluators"] if e["kind"] == "ruler"]
    out["scores"] = {**params["scores"], "populations": "apart", "evaluators": ruler}
    first = ruler[0]["name"]  # the sections that name an evaluator must name one still here
    out["train"] = {**params["train"], "rewards": [first]}
    out["probes"] = {**params["probes"], "judges": [first]}
    out["tracking"] = {**params.get("tracking", {}), "enabled": False}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", type=Path, help="the scratch project's folder")
    root = parser.parse_args().project
    for table in ("tasks/tasks.parquet", "rollouts/rollouts.parquet"):
        (root / "data" / table).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HERE / "data" / table, root / "data" / table)
    params = yaml.safe_load((HERE / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump(scratch_params(params), sort_keys=False))
    print(f"wrote {root / 'params.yaml'} and its tables")


if __name__ == "__main__":
    main()
