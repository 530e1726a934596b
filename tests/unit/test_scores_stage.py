"""The scores stage has one body (`judgelab.scores_stage.score_stage`) that the scores flow
and `judgelab.score` both run; only the fan-out (Prefect tasks under lane limits, or one call
at a time in process) and the sink (the stage's files, or the table returned) differ.

The golden tasks and rollouts (tests/golden/), scored with the golden run's settings by
loopback judges whose replies are pure functions of the request, give the committed
tests/golden/scores.parquet through both paths: every cell but the run id (a hash that names
the endpoint's URL, and so its port) and the latency (wall clock).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

import judgelab
from judgelab.config import load_settings
from judgelab.errors import EXIT_UNAVAILABLE, exit_code
from judgelab.flows.scores import scores_flow
from judgelab.paths import calls_file, structured_output_path
from judgelab.scores_stage import ScoresRun, in_process, score_stage, write_files
from judgelab.scoring import JudgeCallsFailed

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
# wall clock, and the run id: it hashes the models' settings, the endpoint's URL among them
UNCOMPARED = ["latency_s", "run_id"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JUDGELAB_ROOT", str(tmp_path))  # the judge cache: under it, empty
    monkeypatch.chdir(tmp_path)
    return tmp_path


def golden_params(base_url: str) -> dict[str, Any]:
    from tests.integration.test_golden_tables import params  # the golden run's settings

    return params(base_url)


def test_the_flow_and_the_api_score_the_golden_tables_as_committed(project: Path) -> None:
    from support.openai_server import OpenAIServer
    from support.pure_endpoint import pure_reply

    tasks = pl.read_parquet(GOLDEN / "tasks.parquet")
    # the golden copy drops the sampling's wall clock; the table has it
    rollouts = pl.read_parquet(GOLDEN / "rollouts.parquet").with_columns(latency_s=pl.lit(0.0))
    for name, frame in (("tasks", tasks), ("rollouts", rollouts)):
        frame.write_parquet(project / f"{name}.parquet")
    out = project / "scores" / "scores.parquet"
    with OpenAIServer(pure_reply) as server:
        (project / "params.yaml").write_text(yaml.safe_dump(golden_params(server.base_url)))
        scores_flow(params=project / "params.yaml", tasks=project / "tasks.parquet",
                    rollouts=project / "rollouts.parquet", out=out)  # fmt: skip
        sent = len(server.requests)
        api = judgelab.score(tasks, rollouts, load_settings(project / "params.yaml"))
        assert len(server.requests) == sent > 0  # the API found every judge call cached
    flow = pl.read_parquet(out)
    golden = pl.read_parquet(GOLDEN / "scores.parquet")
    assert flow.drop("latency_s").equals(api.drop("latency_s"))  # the same run id too
    assert flow.drop(UNCOMPARED).equals(golden.drop(UNCOMPARED, strict=False))
    assert flow["run_id"].n_unique() == 1
    counts = json.loads(calls_file(out).read_text())["judge"]
    assert counts["misses"] == sent  # a request each call the cache could not answer
    assert not structured_output_path(out).exists()  # every endpoint's mode was configured


def _settings(base_url: str) -> Any:
    loop = {"kind": "endpoint", "base_url": base_url, "model": "loop",
            "structured_output": "json_schema"}  # fmt: skip
    judge = {"name": "rubric-loop", "kind": "rubric", "judge": "loop", "call": {"retries": 0}}
    return judgelab.make_settings({"models": {"loop": loop}}, [judge], tests=False)


def test_a_judge_that_scored_nothing_fails_the_stage_after_its_files_are_written(
    project: Path,
) -> None:
    """With `raise_failures` (the flow) a loud judge raises once the sink has written, naming
    the table; without it (the API) its failure is in the run, and the table is returned."""
    from support.openai_server import OpenAIServer, ok

    tasks = judgelab.load_tasks([{"task_id": "t", "request": "Write f(x) returning x."}])
    rollouts = judgelab.load_candidates(tasks, {"t": ["def f(x): return x", "def f(x): 0"]})
    out = project / "data" / "scores.parquet"
    with OpenAIServer(lambda body: ok("no verdict here")) as server:
        settings = _settings(server.base_url)
        kept: list[ScoresRun] = []
        run = score_stage(settings, tasks, rollouts, fan_out=in_process, sink=kept.append)
        with pytest.raises(JudgeCallsFailed, match=r"rubric-loop") as failed:
            score_stage(settings, tasks, rollouts, sink=write_files(out), raise_failures=True,
                        where=str(out))  # fmt: skip
    assert kept == [run] and [f.evaluator for f in run.failures] == ["rubric-loop"]
    assert set(run.frame["status"]) == {"unscored"} and run.frame.height == 2
    assert str(out) in str(failed.value) and exit_code(failed.value) == EXIT_UNAVAILABLE
    assert pl.read_parquet(out).drop("latency_s").equals(run.frame.drop("latency_s"))
    assert json.loads(calls_file(out).read_text())["judge"]["hits"] > 0  # the second run's
