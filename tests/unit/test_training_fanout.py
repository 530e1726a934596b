"""A training epoch's judge and test calls fan out (judgelab.flows.training): two judges on two
loopback endpoints are in flight together, neither endpoint beyond its max_concurrency, and the
scored rows and history rows are those of a run that makes one call at a time.

No policy is loaded: the epoch's samples are given (answers from `support.pure_endpoint`,
real HumanEval tasks), and they go through the trainer's own scoring (`Trainer.score`,
`Trainer.epoch_row`) with real judges on real HTTP servers and the real sandbox. The calls run
as Prefect tasks submitted from inside a task, as the training flow submits them.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
from prefect import flow, task
from prefect.cache_policies import NONE
from prefect.task_runners import ThreadPoolTaskRunner

from judgelab.cache import JsonCache, digest
from judgelab.config import HumanEvalSettings, Settings, parse_settings
from judgelab.config.evaluators import ExecutionSettings, FormatSettings
from judgelab.evaluators.base import PointwiseEvaluator
from judgelab.evaluators.execution import ExecutionEvaluator
from judgelab.evaluators.registry import build_evaluator
from judgelab.flows.training import fanned_out
from judgelab.models.server import serve
from judgelab.scoring import Scorer, score_serially
from judgelab.tasks.humaneval import load_humaneval
from judgelab.training.policy import Sample
from judgelab.training.round import Drawn, EpochScores, RewardRun
from judgelab.training.run import heldout_tasks
from judgelab.training.trainer import Trainer
from judgelab.verdicts import Candidate, Task, Verdict
from support.openai_server import OpenAIServer, Reply
from support.pure_endpoint import policy_answer, pure_reply

LATENCY_S = 0.5  # each judge call's; a loopback server answers in ~1 ms otherwise
LIMIT = 2  # max_concurrency of both endpoints
CLOCK = {"latency_s", "score_s", "heldout_s", "rollout_s", "step_s"}


@pytest.fixture(scope="module", autouse=True)
def prefect_api() -> Iterator[None]:
    from judgelab_cli.deploy import temporary_prefect_server

    with temporary_prefect_server():
        yield


class Meter:
    """Judge calls in flight on each endpoint, counted inside the servers' handlers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.peak_total = 0
        self.overlapped = False  # a call started while the other endpoint had one in flight

    def reply(self, endpoint: str) -> Any:
        def answer(body: dict[str, Any]) -> Reply:
            with self.lock:
                self.now[endpoint] += 1
                self.peak[endpoint] = max(self.peak[endpoint], self.now[endpoint])
                self.peak_total = max(self.peak_total, sum(self.now.values()))
                self.overlapped |= any(n for e, n in self.now.items() if e != endpoint)
            try:
                time.sleep(LATENCY_S)
                return pure_reply(body)
            finally:
                with self.lock:
                    self.now[endpoint] -= 1

        return answer


def settings_for(url_a: str, url_b: str, limit: int) -> Settings:
    endpoint = {"kind": "endpoint", "structured_output": "json_schema", "max_concurrency": limit}
    return parse_settings(
        {
            "models": {
                "judge-a": {**endpoint, "base_url": url_a, "model": "judge-a", "family": "a"},
                "judge-b": {**endpoint, "base_url": url_b, "model": "judge-b", "family": "b"},
                "policy": {"kind": "embedded", "zoo": "smollm2-135m-instruct", "family": "s"},
            },
            "rollouts": {"policy": "policy"},
            "tasks": {"autorl": {"enabled": False, "model": "policy"}},
            "scores": {
                "evaluators": [
                    {"name": "execution", "kind": "execution", "timeout_s": 10, "cpu_s": 10},
                    {"name": "ruler-a", "kind": "ruler", "judge": "judge-a"},
                    {"name": "rubric-b", "kind": "rubric", "judge": "judge-b"},
                ]
            },
            "train": {
                "rewards": ["ruler-a", "rubric-b"],
                "policy": "policy",
                "groups_per_epoch": 2,
                "select": "all",
                "k": 3,
                "heldout": {"select": "fixed", "offset": 100, "limit": 1, "samples": 2},
            },
        }
    )


def no_policy(adapters: object) -> Any:
    raise AssertionError("scoring must not load a policy")


def trainer_for(settings: Settings, endpoints: dict, cache: Path, scorer: Scorer) -> Trainer:
    judge_cache = JsonCache(cache, "judge")  # a cold cache per run: every call is made
    runs = [
        RewardRun(name, build_evaluator(settings.evaluator(name), endpoints, judge_cache), cache)
        for name in settings.train.rewards
    ]
    return Trainer(
        runs=runs,
        settings=settings.train,
        rollout=settings.rollouts,
        tasks=load_humaneval(HumanEvalSettings(offset=0, limit=2)),
        heldout=heldout_tasks(settings),
        cache=JsonCache(cache, "samples"),
        executor=ExecutionEvaluator(ExecutionSettings(name="execution")),
        policy_factory=no_policy,
        scorer=scorer,
    )


def drawn_for(trainer: Trainer, epoch: int) -> list[Drawn]:
    """Each judge's round as the sampler would return it: a pure answer per (prompt, seed),
    the same for both judges (as at epoch 0, where every adapter is the base model). Each
    draw is numbered: no two candidates are alike, so every rubric call is made."""
    out = []
    for run in trainer.runs:
        requests = trainer.requests(run, epoch)
        groups = []
        for r in requests:
            texts = [
                f"Draw {i}.\n" + policy_answer(r.messages[-1]["content"], "policy", s)
                for i, s in enumerate(r.seeds)
            ]
            groups.append([Sample([len(t), s], [-0.5, -0.5], t, "stop")
                           for t, s in zip(texts, r.seeds, strict=True)])  # fmt: skip
        out.append(Drawn(run, digest({"base": 0})[:16], requests, groups))
    return out


@task(cache_policy=NONE)
def score_epoch(trainer: Trainer, epoch: int) -> list[dict[str, Any]]:
    """One epoch's scoring, then each judge's history row and its judge rows."""
    out = []
    for scores in trainer.score(epoch, drawn_for(trainer, epoch)):
        assert not isinstance(scores, Exception), scores
        row = trainer.epoch_row(epoch, scores)
        judged = [r for g in scores.train if g.judged is not None for r in g.judged.rows]
        out.append({"row": asdict(row), "judged": judged})
    return out


@flow(task_runner=ThreadPoolTaskRunner(max_workers=16))
def concurrent_flow(trainer: Trainer, epoch: int) -> list[dict[str, Any]]:
    return score_epoch(trainer, epoch)


@flow(task_runner=ThreadPoolTaskRunner(max_workers=1))
def one_thread_flow(trainer: Trainer, epoch: int) -> list[dict[str, Any]]:
    return score_epoch(trainer, epoch)


def clockless(result: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "row": {k: v for k, v in r["row"].items() if k not in CLOCK},
            "judged": [{k: v for k, v in row.items() if k not in CLOCK} for row in r["judged"]],
        }
        for r in result
    ]


def run(tmp: Path, limit: int, how: str) -> tuple[list[dict[str, Any]], Meter, list[Any]]:
    meter = Meter()
    with (
        OpenAIServer(meter.reply("a"), max_concurrency=limit) as a,
        OpenAIServer(meter.reply("b"), max_concurrency=limit) as b,
    ):
        settings = settings_for(a.base_url, b.base_url, limit)
        with serve(settings, settings.models_called("training")) as endpoints:
            if how == "serially":
                trainer = trainer_for(settings, endpoints, tmp, score_serially)
                result = score_epoch.fn(trainer, 1)
            else:
                trainer = trainer_for(settings, endpoints, tmp, fanned_out(settings))
                make = concurrent_flow if how == "fanned out" else one_thread_flow
                result = make(trainer, 1)
    return result, meter, [a, b]


def test_two_judges_on_two_endpoints_overlap_each_within_its_limit(tmp_path: Path) -> None:
    result, meter, servers = run(tmp_path, LIMIT, "fanned out")
    # ruler-a: one call per group (2 groups); rubric-b: one per candidate (2 groups x 3)
    assert [len(s.requests) for s in servers] == [2, 6]
    assert meter.overlapped and meter.peak_total > LIMIT  # both judges at once
    assert meter.peak["a"] == meter.peak["b"] == LIMIT  # each endpoint up to its limit...
    assert [s.max_in_flight for s in servers] == [LIMIT, LIMIT]  # ...and never beyond it
    assert [s.rejected for s in servers] == [0, 0]
    rows = [r["row"] for r in result]
    assert [r["judge"] for r in rows] == ["ruler-a", "rubric-b"]
    assert all(r["unscored_rate"] == 0 and r["reward_std"] for r in rows)  # judged, varied
    assert all(r["train_pass_rate"] is not None and r["heldout_n"] == 2 for r in rows)


def test_concurrent_scoring_gives_the_serial_rows(tmp_path: Path) -> None:
    fanned, _, _ = run(tmp_path / "fanned", LIMIT, "fanned out")
    serial, meter, _ = run(tmp_path / "serial", 1, "one thread")
    library, _, _ = run(tmp_path / "library", 1, "serially")
    assert meter.peak_total == 1  # the reference made one call at a time
    assert clockless(fanned) == clockless(serial) == clockless(library)
    # the samples table's rows, in order: every training and held-out sample of both judges
    records = [r["row"]["records"] for r in fanned]
    assert [len(r) for r in records] == [2 * 3 + 2, 2 * 3 + 2]
    assert [r["split"] for r in records[0]] == ["train"] * 6 + ["heldout"] * 2


class Broken(PointwiseEvaluator):
    """Test-only: a judge that crashes (a bug, not a bad reply: those are unscored rows)."""

    protocol = "rule"

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        raise RuntimeError("judge crashed")


def test_a_judge_whose_call_fails_gets_its_error_and_the_other_judge_its_scores(
    tmp_path: Path,
) -> None:
    with OpenAIServer(pure_reply) as a:
        settings = settings_for(a.base_url, a.base_url, LIMIT)
        with serve(settings, settings.models_called("training")) as endpoints:
            trainer = trainer_for(settings, endpoints, tmp_path, score_serially)
            drawn = drawn_for(trainer, 1)
            broken = RewardRun("broken", Broken(FormatSettings(name="broken")), tmp_path)
            ok, failed = trainer.score(1, [drawn[0], replace(drawn[1], run=broken)])
    assert isinstance(ok, EpochScores) and ok.drawn.run.name == "ruler-a"
    assert trainer.epoch_row(1, ok).unscored_rate == 0
    assert isinstance(failed, RuntimeError) and str(failed) == "judge crashed"
