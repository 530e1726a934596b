"""Rollout cache: hit, miss, and resume after a kill -9, against a loopback server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judgelab.cache import JsonCache
from judgelab.config import RolloutSettings
from judgelab.models.endpoint import Endpoint
from judgelab.rollouts.generate import generate_group, rollouts_frame, sample_seed
from judgelab.verdicts import Task
from support.openai_server import OpenAIServer, Reply, http_error, ok

TASK = Task(
    task_id="HumanEval/0",
    source="humaneval",
    request="write f",
    prompt="def f(): pass",
    entry_point="f",
    test="def check(c): pass",
)


def by_seed(body: dict) -> Reply:
    # Deterministic in the request, like a seeded model.
    return ok(f"<code>answer for seed {body['seed']}</code>")


def endpoint(url: str, fingerprint: str = "gguf:abc") -> Endpoint:
    return Endpoint(name="stub", base_url=url, model="stub", fingerprint=fingerprint)


def test_miss_then_hit(tmp_path: Path) -> None:
    settings = RolloutSettings(k=3)
    with OpenAIServer(by_seed) as srv:
        ep = endpoint(srv.base_url)
        first = generate_group(settings, TASK, ep, JsonCache(tmp_path, "completions"))
        assert len(srv.requests) == 3
        again = generate_group(settings, TASK, ep, JsonCache(tmp_path, "completions"))
        assert len(srv.requests) == 3  # all hits
    assert first == again
    assert [r["seed"] for r in first] == [sample_seed(0, TASK.task_id, i) for i in range(3)]
    assert len({r["candidate_id"] for r in first}) == 3
    rollouts_frame(first)  # passes the schema


def test_key_changes_with_what_changes_the_output(tmp_path: Path) -> None:
    with OpenAIServer(by_seed) as srv:
        cache = JsonCache(tmp_path, "completions")
        base = generate_group(RolloutSettings(k=2), TASK, endpoint(srv.base_url), cache)
        n = len(srv.requests)
        # Not part of the key: the server address.
        with OpenAIServer(by_seed) as other:
            generate_group(RolloutSettings(k=2), TASK, endpoint(other.base_url), cache)
            assert other.requests == []
        # Part of the key: temperature, weights, k extends without redrawing.
        generate_group(RolloutSettings(k=2, temperature=0.5), TASK, endpoint(srv.base_url), cache)
        generate_group(RolloutSettings(k=2), TASK, endpoint(srv.base_url, "gguf:other"), cache)
        assert len(srv.requests) == n + 4
        more = generate_group(RolloutSettings(k=3), TASK, endpoint(srv.base_url), cache)
        assert len(srv.requests) == n + 5
        assert more[:2] == base


CHILD = """
import sys
from pathlib import Path
from judgelab.cache import JsonCache
from judgelab.config import RolloutSettings
from judgelab.models.endpoint import Endpoint
from judgelab.rollouts.generate import generate_group
from tests.unit.test_rollouts import TASK
ep = Endpoint(name="stub", base_url=sys.argv[1], model="stub", fingerprint="gguf:abc")
generate_group(RolloutSettings(k=6), TASK, ep, JsonCache(Path(sys.argv[2]), "completions"))
"""


def test_resume_after_kill_recomputes_only_missing_samples(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]

    def slow(body: dict) -> Reply:
        if len(srv.requests) > 2:
            time.sleep(30)  # the child is killed while waiting here
        return by_seed(body)

    with OpenAIServer(slow) as srv:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, srv.base_url, str(tmp_path)],
            cwd=root,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])},
        )
        deadline = time.monotonic() + 60
        while len(srv.requests) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert len(srv.requests) == 3
    entries = list((tmp_path / "completions").rglob("*.json"))
    assert len(entries) == 2  # the two finished samples, nothing torn
    with OpenAIServer(by_seed) as resumed:
        rows = generate_group(
            RolloutSettings(k=6),
            TASK,
            endpoint(resumed.base_url),
            JsonCache(tmp_path, "completions"),
        )
        assert len(resumed.requests) == 4
    with OpenAIServer(by_seed) as fresh:
        clean = generate_group(
            RolloutSettings(k=6),
            TASK,
            endpoint(fresh.base_url),
            JsonCache(tmp_path / "clean", "completions"),
        )
    assert [r["completion"] for r in rows] == [r["completion"] for r in clean]
    assert json.loads(rows[0]["messages_json"])[1]["content"] == "write f"


@pytest.mark.parametrize("status", [500, 503])
def test_transient_errors_are_retried(tmp_path: Path, status: int) -> None:
    calls = {"n": 0}

    def flaky(body: dict) -> Reply:
        calls["n"] += 1
        return http_error(status, "busy") if calls["n"] == 1 else by_seed(body)

    from judgelab.models import client

    with OpenAIServer(flaky) as srv:
        out = client.chat(
            endpoint(srv.base_url),
            [{"role": "user", "content": "x"}],
            temperature=0,
            max_tokens=5,
            seed=1,
            backoff_s=0.01,
        )
    assert out.text.startswith("<code>") and calls["n"] == 2


def test_merge_system_folds_into_the_first_user_turn() -> None:
    from judgelab.models.client import merge_system

    msgs = [
        {"role": "system", "content": "S1"},
        {"role": "assistant", "content": "A"},
        {"role": "system", "content": "S2"},
        {"role": "user", "content": "U"},
    ]
    assert merge_system(msgs) == [
        {"role": "assistant", "content": "A"},
        {"role": "user", "content": "S1\n\nS2\n\nU"},
    ]
    assert merge_system([{"role": "system", "content": "S"}]) == [{"role": "user", "content": "S"}]
    assert merge_system([{"role": "user", "content": "U"}]) == [{"role": "user", "content": "U"}]


# ------------------------------------------------------------------ several writers

TASK_B = Task(task_id="HumanEval/1", source="humaneval", request="write g", prompt="def g(): pass")


def by_model(body: dict) -> Reply:
    return ok(f"<code>{body['model']} seed {body['seed']}</code>")


def writers_settings(**rollouts: object) -> object:
    from judgelab.config import parse_settings

    ep = {"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1"}
    models = {n: {**ep, "model": n} for n in ("small", "large", "judge")}
    return parse_settings(
        {
            "models": models,
            "tasks": {"autorl": {"enabled": False}},
            "rollouts": rollouts,
            "scores": {"evaluators": [{"name": "execution", "kind": "execution"}]},
            "train": {"rewards": []},
        }
    )


def test_several_writers_fill_one_group_each_sample_as_it_would_be_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from judgelab.flows.fanout import Lanes
    from judgelab.flows.rollouts import group_units, rollout_group_task

    monkeypatch.setenv("JUDGELAB_CACHE", str(tmp_path))
    settings = writers_settings(policies=["small", "large"], k=2)
    with OpenAIServer(by_model) as srv:
        eps = {
            n: Endpoint(name=n, base_url=srv.base_url, model=n, fingerprint=f"endpoint:x|{n}")
            for n in ("small", "large")
        }
        units = group_units(settings.rollouts, [TASK, TASK_B], eps, Lanes(settings, ["small"]))
        # writer-major, so an embedded server swaps models once per writer
        assert [(u.kwargs["endpoint"].name, u.label) for u in units] == [
            ("small", "HumanEval/0"), ("small", "HumanEval/1"),
            ("large", "HumanEval/0"), ("large", "HumanEval/1"),
        ]  # fmt: skip
        frame = rollouts_frame([r for u in units for r in rollout_group_task.fn(**u.kwargs)[0]])
        alone = generate_group(
            RolloutSettings(k=2), TASK, eps["large"], JsonCache(tmp_path / "alone", "completions")
        )
    group = frame.filter(task_id="HumanEval/0")
    assert group["sample_index"].to_list() == [0, 1, 2, 3]
    assert group["policy"].to_list() == ["small", "small", "large", "large"]
    assert group["completion"].str.starts_with("<code>small").to_list() == [1, 1, 0, 0]
    # the second writer's samples are the ones it draws alone: same seeds, keys and ids
    late = group.filter(policy="large")
    assert late["cache_key"].to_list() == [r["cache_key"] for r in alone]
    assert late["seed"].to_list() == [r["seed"] for r in alone]
    assert late["candidate_id"].to_list() == [r["candidate_id"] for r in alone]


def test_two_writers_that_are_one_model_are_refused_before_sampling() -> None:
    from judgelab.errors import ConfigError
    from judgelab.rollouts.generate import distinct_writers

    same = Endpoint(name="a", base_url="http://x", model="m", fingerprint="gguf:abc")
    with pytest.raises(ConfigError, match="'a' and 'b' are the same model"):
        distinct_writers({"a": same, "b": Endpoint(**{**same.__dict__, "name": "b"})})
    distinct_writers({"a": same, "b": Endpoint(**{**same.__dict__, "fingerprint": "gguf:x"})})


def test_policies_setting_one_writer_or_several() -> None:
    from judgelab.errors import ConfigError

    assert writers_settings(policy="large").rollouts.writers == ["large"]
    assert RolloutSettings().writers == ["qwen-0.5b"]
    assert writers_settings(policies=["large", "small"]).rollouts.writers == ["large", "small"]
    bad = [
        ({"policy": "small", "policies": ["large"]}, "not both"),
        ({"policies": ["small", "small"]}, "listed twice"),
        ({"policies": ["small", "large"], "k": 40}, "at most 64"),
        ({"policies": []}, "at least 1"),
        ({"policies": ["small", "huge"]}, "rollouts.policies[1]: unknown model 'huge'"),
    ]
    for rollouts, message in bad:
        with pytest.raises(ConfigError) as err:
            writers_settings(**rollouts)
        assert message in str(err.value), (rollouts, str(err.value))


def test_extra_candidates_join_each_group_after_the_writers_samples(tmp_path: Path) -> None:
    from judgelab.rollouts.imported import join_candidates

    extra = tmp_path / "contrast.jsonl"
    lines = [
        {"task_id": "HumanEval/1", "policy": "reference", "completion": "<code>ref</code>"},
        {"task_id": "HumanEval/0", "policy": "reference", "completion": "<code>ref</code>"},
        {"task_id": "HumanEval/0", "policy": "operator_flip", "completion": "<code>x</code>"},
    ]
    extra.write_text("".join(json.dumps(x) + "\n" for x in lines))
    settings = RolloutSettings(k=2)
    with OpenAIServer(by_seed) as srv:
        cache = JsonCache(tmp_path, "completions")
        sampled = [
            r
            for t in (TASK, TASK_B)
            for r in generate_group(settings, t, endpoint(srv.base_url), cache)
        ]
    joined = join_candidates(extra, "rollouts.extra_candidates", [TASK, TASK_B], settings, 2)
    frame = rollouts_frame(sampled + joined)
    group = frame.filter(task_id="HumanEval/0")
    assert group["sample_index"].to_list() == [0, 1, 2, 3]
    assert group["policy"].to_list() == ["stub", "stub", "reference", "operator_flip"]
    assert frame.filter(task_id="HumanEval/1")["policy"].to_list() == ["stub", "stub", "reference"]
    # the file's ids are its content's, whatever was sampled beside them
    assert set(joined[0]) == set(sampled[0]) and joined[0]["sample_index"] == 2
    with pytest.raises(Exception, match="set one of them"):
        RolloutSettings(candidates="inputs/a.jsonl", extra_candidates="inputs/b.jsonl")
