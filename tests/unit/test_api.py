"""The Python API (`judgelab.api`) and the reward kind (`judgelab.evaluators.reward`): README's
"Python API" section run as written, the reward function's contract (wrong count, not a
number, NaN: an error naming the group; None: unscored; its range), settings and in-memory
inputs validated with errors naming the field, and `import judgelab` staying cheap."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import judgelab
from judgelab.errors import ConfigError
from judgelab.evaluators.registry import build_evaluator
from judgelab.evaluators.reward import REWARDS, RewardFunctionError
from judgelab.verdicts import Candidate, Task

ROOT = Path(__file__).resolve().parents[2]


def readme_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```", section, re.S | re.M)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project root: the audit's report, and any cache, land here."""
    monkeypatch.setenv("JUDGELAB_ROOT", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_python_api_runs_as_written(project: Path) -> None:
    blocks = readme_blocks()
    assert len(blocks) == 2
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "README.md (Python API, 1)", "exec"), namespace)
    result = namespace["result"]
    assert result.report == Path("my-audit/report.md") and (project / result.report).exists()
    assert (project / "my-audit/report.html").exists()
    assert result.decision.verdict in ("judge", "cannot_tell", "no_judge", "no_ranking")
    scores = result.scores
    truth = scores.filter(evaluator="execution").sort("candidate_id")
    mine = scores.filter(evaluator="shortest").sort("candidate_id")
    # the sandbox ran the tests: the right clamp passes, the swapped one and `x` fail, prose
    # has no code
    completions = dict(result.rollouts.select("candidate_id", "completion").iter_rows())
    outcomes = {completions[c]: o for c, o in truth.select("candidate_id", "outcome").rows()}
    assert sorted(outcomes.values()) == ["no_code", "passed", "tests_failed", "tests_failed"]
    assert outcomes["Use max and min."] == "no_code"
    assert [o for c, o in outcomes.items() if "max(lo, min(x, hi))" in c] == ["passed"]
    # the reward function's own values, and None as unscored, went through the evaluator
    for cid, score, status in mine.select("candidate_id", "score", "status").rows():
        text = completions[cid]
        if "def " in text:
            assert status == "scored" and score == pytest.approx(1 / (1 + len(text) / 100))
        else:
            assert status == "unscored" and score is None
    assert mine["protocol"].unique().to_list() == ["reward"]
    figures = result.evaluator("shortest")
    assert figures["n_unscored"] == 1 and figures["protocol"] == "reward"
    metrics = json.loads((project / "my-audit/metrics.json").read_text())
    assert metrics["decision"] == result.decision.raw
    assert set(metrics["evaluators"]) == {"execution", "shortest", "syntax"}

    exec(compile(blocks[1], "README.md (Python API, 2)", "exec"), namespace)
    staged = namespace["result"]
    assert staged.settings.analysis.praise_threshold == 0.5
    assert set(staged.metrics["evaluators"]) == {"execution", "shortest"}  # the truth joined
    assert staged.scores.filter(evaluator="shortest")["score"].to_list() == pytest.approx(
        mine.sort(["task_id", "candidate_id"])["score"].to_list(), nan_ok=True
    )


def _task(test: bool = True) -> Task:
    return Task(
        task_id="t1",
        source="files",
        prompt="def f(x):",
        request="Write f.",
        entry_point="f" if test else None,
        test="def check(candidate):\n    assert candidate(1) == 1\n" if test else None,
    )


def _group(n: int = 3) -> list[Candidate]:
    return [Candidate("t1", f"c{i}", i, "x" * (i + 1)) for i in range(n)]


def _reward(function: str, **keys: Any) -> Any:
    evaluators = [{"name": "r", "kind": "reward", "function": function, **keys}]
    settings = judgelab.make_settings(
        {"scores": {"evaluators": evaluators}},
        tests=False,
        in_memory_tasks=True,
        in_memory_candidates=True,
    )
    return build_evaluator(settings.scores.evaluators[0], {})


def lengths(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    """A reward importable as tests.unit.test_api:lengths: each completion's length."""
    assert prompts == ["Write f."] * len(completions)
    assert kwargs["task_id"] == ["t1"] * len(completions)
    assert kwargs["candidate_id"] == [f"c{i}" for i in range(len(completions))]
    assert kwargs["test"][0] is None or kwargs["test"][0].startswith("def check")
    return [float(len(c)) for c in completions]


def test_a_reward_named_module_function_maps_its_range_and_keeps_the_raw_value() -> None:
    ev = _reward("tests.unit.test_api:lengths", min_score=1, max_score=3, out_of_range="unscore")
    verdicts = ev.score_group(_task(), _group(4))
    assert [v.score for v in verdicts] == [0.0, 0.5, 1.0, None]
    assert [v.raw_score for v in verdicts] == [1.0, 2.0, 3.0, 4.0]
    assert verdicts[3].out_of_range and verdicts[3].reason == (
        "out of range: raw score 4 outside [1, 3]"
    )
    clipped = _reward("tests.unit.test_api:lengths", max_score=2, out_of_range="clip")
    assert [v.score for v in clipped.score_group(_task(False), _group(3))] == [0.5, 1.0, 1.0]


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ([1.0, 0.0], r"returned 2 rewards for 3 completions"),
        ([1.0, "0.5", 0.0], r"completion 1: '0\.5' \(str\) is not a number or None"),
        ([1.0, True, 0.0], r"completion 1: True \(bool\) is not a number"),
        ([1.0, math.nan, 0.0], r"completion 1: nan is not finite"),
        (0.5, r"returned float, not a list of 3 rewards"),
    ],
)
def test_a_broken_reward_is_an_error_naming_the_evaluator_and_the_group(
    returned: Any, message: str
) -> None:
    judgelab.register_reward("broken", lambda prompts, completions, **kw: returned)
    with pytest.raises(
        RewardFunctionError, match=r"reward 'r' \(broken\) on task 't1': " + message
    ):
        _reward("broken").score_group(_task(), _group(3))


def test_none_leaves_a_candidate_unscored_and_names_resolve_or_fail_clearly() -> None:
    judgelab.register_reward("half", lambda prompts, completions, **kw: [0.5, None])
    verdicts = _reward("half").score_group(_task(), _group(2))
    assert (verdicts[0].score, verdicts[1].status) == (0.5, "unscored")
    assert verdicts[1].reason == "the reward function returned None"
    assert REWARDS["half"] is _reward("half").function
    with pytest.raises(ConfigError, match=r"'nowhere' is not a registered reward .* 'module:"):
        _reward("nowhere")
    with pytest.raises(ConfigError, match=r"cannot import module 'no_such_module_x'"):
        _reward("no_such_module_x:f")
    with pytest.raises(ConfigError, match=r"module 'tests.unit.test_api' has no 'missing'"):
        _reward("tests.unit.test_api:missing")
    with pytest.raises(ConfigError, match=r"scores\.evaluators\.0\.function: String should match"):
        _reward("not a name")
    with pytest.raises(ConfigError, match=r"max_score \(0\.0\) must be above min_score"):
        _reward("half", max_score=0)


def test_settings_and_in_memory_inputs_are_checked_as_files_are() -> None:
    with pytest.raises(ConfigError, match=r"settings is invalid:\n  - scores\.repeats: Input"):
        judgelab.make_settings({"scores": {"repeats": 0}})
    with pytest.raises(ConfigError, match=r"analysis\.primry: unknown key"):
        judgelab.Settings.from_dict({"models": {}, "scores": {"evaluators": []},
                                     "analysis": {"primry": "x"}})  # fmt: skip
    s = judgelab.make_settings(judges=["syntax"])
    assert [e.name for e in s.scores.evaluators] == ["syntax", "execution"]  # the truth joins
    again = judgelab.make_settings(s, judges=["format"])  # Settings in, judges joined
    assert [e.name for e in again.scores.evaluators] == ["syntax", "execution", "format"]
    with pytest.raises(ConfigError, match=r"scores\.evaluators\.0: an evaluator is a mapping"):
        judgelab.make_settings({"scores": {"evaluators": ["syntax"]}})
    assert judgelab.make_settings(judges=["syntax"], tests=False).scores.evaluators[0].kind == (
        "syntax"
    )
    with pytest.raises(ConfigError, match=r"has no name to be an evaluator by"):
        judgelab.make_settings(judges=[lambda prompts, completions: []])
    with pytest.raises(ConfigError, match=r"tasks\[1\]: field '<row>': .*entry_point is required"):
        judgelab.load_tasks(
            [{"task_id": "a", "request": "r"}, {"task_id": "b", "request": "r", "test": "x"}]
        )
    with pytest.raises(ConfigError, match=r"tasks\[1\]: task_id 'a' already at tasks\[0\]"):
        judgelab.load_tasks([{"task_id": "a", "request": "r"}, {"task_id": "a", "request": "s"}])
    tasks = judgelab.load_tasks([{"task_id": "a", "request": "r"}])
    with pytest.raises(ConfigError, match=r"candidates\[1\]: field 'task_id': 'b' is not in"):
        judgelab.load_candidates(tasks, [{"task_id": "a", "completion": "x"},
                                         {"task_id": "b", "completion": "y"}])  # fmt: skip
    with pytest.raises(ConfigError, match=r"candidates\[0\]: field 'completion': Field required"):
        judgelab.load_candidates(tasks, [{"task_id": "a", "completon": "x"}])
    rollouts = judgelab.load_candidates(tasks, {"a": ["one", "two"]})
    assert isinstance(rollouts, pl.DataFrame)
    assert rollouts.select("task_id", "sample_index", "completion").rows() == [
        ("a", 0, "one"), ("a", 1, "two")
    ]  # fmt: skip


def test_import_judgelab_is_cheap() -> None:
    script = (
        "import sys, judgelab\n"
        "assert callable(judgelab.register_reward)\n"
        "print(sorted(m.split('.')[0] for m in sys.modules if m.split('.')[0] in "
        "('polars', 'torch', 'prefect', 'transformers', 'judgelab')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    # the registry of reward functions loads the config (pydantic), nothing heavier
    assert set(json.loads(out.stdout.strip().replace("'", '"'))) == {"judgelab"}


def has_def(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
    """A reward importable as tests.unit.test_api:has_def (the command line's judge)."""
    return [1.0 if "def " in c else 0.0 for c in completions]


def test_judgelab_audit_is_the_api_on_files(project: Path) -> None:
    from typer.testing import CliRunner

    from judgelab_cli import app

    files = ["--tasks", str(ROOT / "inputs/example_tasks.jsonl"),
             "--candidates", str(ROOT / "inputs/example_candidates.jsonl")]  # fmt: skip
    bad = CliRunner().invoke(app, ["audit", *files, "--judge", "tests.unit.test_api:nothing"])
    assert bad.exit_code == 2, bad.output
    assert "module 'tests.unit.test_api' has no 'nothing'" in bad.output
    assert not (project / "judgelab-audit").exists()
    run = CliRunner().invoke(
        app, ["audit", *files, "--judge", "tests.unit.test_api:has_def", "--judge", "syntax"]
    )
    assert run.exit_code == 0, run.output
    metrics = json.loads((project / "judgelab-audit/metrics.json").read_text())
    assert set(metrics["evaluators"]) == {"execution", "has_def", "syntax"}
    assert f"decision: {metrics['decision']['verdict']}" in run.output
    assert "report: judgelab-audit/report.md" in run.output
    assert metrics["n_tasks"] == 3 and metrics["evaluators"]["has_def"]["n_candidates"] == 7


def test_the_analysis_flow_and_the_api_run_one_analysis(project: Path) -> None:
    """`judgelab analysis` runs its flow; the flow and `judgelab.analyse` run the stage through
    one function (`report.outputs.analyse_stage`): the same tables give the same figures."""
    import yaml

    from judgelab.flows.analysis import analysis_flow

    neg = {"task_id": "neg", "request": "Write neg(x).", "entry_point": "neg",
           "tests": [{"input": [2], "output": -2}]}  # fmt: skip
    tasks = judgelab.load_tasks([neg])
    written = ["def neg(x):\n    return -x", "def neg(x):\n    return x", "def neg(x) return"]
    rollouts = judgelab.load_candidates(tasks, {"neg": [f"```python\n{c}\n```" for c in written]})
    settings = judgelab.make_settings({"tracking": {"enabled": False}}, judges=["syntax"])
    scores = judgelab.score(tasks, rollouts, settings)
    api = judgelab.analyse(tasks, rollouts, scores, settings, out_dir="api")
    for name, frame in (("tasks", tasks), ("rollouts", rollouts), ("scores", scores)):
        frame.write_parquet(project / f"{name}.parquet")
    (project / "params.yaml").write_text(yaml.safe_dump(settings.model_dump(mode="json")))
    analysis_flow.fn(params=project / "params.yaml", tasks=project / "tasks.parquet",
                     rollouts=project / "rollouts.parquet", scores=project / "scores.parquet",
                     training=project / "training", out=project / "flow")  # fmt: skip
    flow = json.loads((project / "flow/metrics.json").read_text())
    assert flow["evaluators"] == api.metrics["evaluators"] and flow["n_score_rows"] == 6
    assert flow["decision"] == api.decision.raw
    assert api.evaluator("syntax")["n_scored"] == 3


def test_an_endpoint_judge_is_audited_through_its_settings_and_cached(project: Path) -> None:
    """A judge behind an OpenAI-compatible endpoint (a real loopback server whose replies are
    pure functions of the request) is an evaluator spec with its model in `models`; a second
    scoring of the same candidates is answered from the judge cache."""
    from support.openai_server import OpenAIServer
    from support.pure_endpoint import pure_reply

    tasks = [{"task_id": "t", "request": "Write f(x) returning x."}]  # no tests: judge-only
    candidates = {"t": ["```python\ndef f(x):\n    return x\n```", "```python\ndef f(x): 0\n```"]}
    with OpenAIServer(pure_reply) as server:
        loop = {"kind": "endpoint", "base_url": server.base_url, "model": "loop",
                "structured_output": "json_schema"}  # fmt: skip
        settings = {"models": {"loop": loop}}
        judges = [{"name": "rubric-loop", "kind": "rubric", "judge": "loop"}]
        first = judgelab.audit(tasks, candidates, judges=judges, settings=settings, tests=False)
        sent = len(server.requests)
        again = judgelab.score(first.tasks, first.rollouts, first.settings)
    assert sent == 2 and len(server.requests) == sent  # one call per candidate, then cached
    rows = first.scores.select("status", "score", "judge").rows()
    assert [(status, judge) for status, _, judge in rows] == [("scored", "loop")] * 2
    assert all(0 <= score <= 1 for _, score, _ in rows)
    assert again["score"].to_list() == first.scores["score"].to_list()
    assert "judge_only" in first.metrics and first.decision.verdict == "no_ranking"


def test_without_candidates_the_policy_writes_k_per_task_through_the_cache(project: Path) -> None:
    from support.openai_server import OpenAIServer
    from support.pure_endpoint import policy_answer, pure_reply

    tasks = judgelab.load_tasks(
        [{"task_id": "trunc", "request": "Write def truncate_number(number: float) -> float."}]
    )
    with OpenAIServer(pure_reply) as server:
        writer = {"kind": "endpoint", "base_url": server.base_url, "model": "writer"}
        settings = {"models": {"writer": writer}, "rollouts": {"policy": "writer", "k": 3}}
        rollouts = judgelab.load_candidates(tasks, None, settings)
        sent = len(server.requests)
        again = judgelab.load_candidates(tasks, None, settings)
    assert sent == 3 and len(server.requests) == sent  # k samples, then the completion cache
    assert rollouts["policy"].to_list() == ["writer"] * 3 and rollouts["seed"].n_unique() == 3
    request = tasks["request"][0]  # the endpoint's reply is a function of request and seed
    assert rollouts["completion"].to_list() == [
        policy_answer(request, "writer", seed) for seed in rollouts["seed"]
    ]
    assert again["candidate_id"].to_list() == rollouts["candidate_id"].to_list()
