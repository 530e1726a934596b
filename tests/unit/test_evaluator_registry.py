"""The evaluator registry: kinds, their settings, lazy imports, and a new kind end to end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
import yaml
from pydantic import Field

from judgelab.config import load_settings, parse_settings
from judgelab.config.evaluators import SETTINGS, EvaluatorSettings
from judgelab.errors import ConfigError
from judgelab.evaluators.base import Evaluator, PointwiseEvaluator
from judgelab.evaluators.registry import build_evaluator, evaluator_class
from judgelab.scoring import score_group, scores_frame
from judgelab.verdicts import Candidate, Task, Verdict

ROOT = Path(__file__).resolve().parents[2]


def test_every_kind_names_its_own_settings_and_an_evaluator_class() -> None:
    kinds = ["format", "syntax", "execution", "ruler", "rubric", "reward", "planted"]
    assert list(SETTINGS) == kinds
    for kind, settings in SETTINGS.items():
        assert settings.model_fields["kind"].default == kind
        assert settings.evaluator.startswith("judgelab.evaluators."), kind
        assert issubclass(evaluator_class(kind), Evaluator)


def test_an_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown evaluator kind 'vibes'; valid kinds: 'format'"):
        evaluator_class("vibes")
    with pytest.raises(ConfigError, match=r"scores\.evaluators\.0: an evaluator is a mapping"):
        parse_settings({"models": {}, "scores": {"evaluators": ["format"]}})
    with pytest.raises(ConfigError, match=r"scores\.evaluators\.0: no kind given; valid kinds"):
        parse_settings({"models": {}, "scores": {"evaluators": [{"name": "format"}]}})


def test_the_spec_says_which_evaluators_call_a_judge_and_how_often_they_run() -> None:
    s = load_settings(ROOT / "params.yaml")
    for ev in s.scores.evaluators:
        calls_model = ev.kind in ("ruler", "rubric")
        assert ev.judge_model == (ev.judge if calls_model else None)  # type: ignore[attr-defined]
        assert ev.repeats(3) == (3 if calls_model else 1)


def test_a_dump_keeps_every_kinds_own_keys() -> None:
    """The run id and MLflow params hash the dump: a kind's keys must all be in it."""
    d = yaml.safe_load((ROOT / "params.yaml").read_text())
    dumped = parse_settings(d).scores.model_dump(mode="json")["evaluators"]
    for given, got in zip(d["scores"]["evaluators"], dumped, strict=True):
        assert {k: got[k] for k in given} == given
    ruler = next(ev for ev in dumped if ev["kind"] == "ruler")
    assert {"judge", "shuffle", "rubric", "call"} <= set(ruler)


def test_importing_the_registry_and_scoring_leaves_art_and_litellm_out() -> None:
    """Parsing params.yaml and building rule and execution evaluators imports neither ART nor
    litellm; building an LLM judge imports litellm (the control that this test can fail), and
    a RULER judge imports ART on its first call, not when it is built (`import art` imports
    transformers where the train extra is installed)."""
    script = """
import sys
from judgelab.config import load_settings
from judgelab.evaluators.registry import build_evaluator
from judgelab.models.endpoint import Endpoint
import judgelab.scoring
settings = load_settings("params.yaml")
for spec in settings.scores.evaluators:
    if spec.judge_model is None:
        build_evaluator(spec, {})
print(sorted(m for m in ("art", "litellm") if m in sys.modules))
ruler = next(s for s in settings.scores.evaluators if s.kind == "ruler")
ep = Endpoint(name="j", base_url="http://127.0.0.1:9/v1", model="m", fingerprint="fp")
build_evaluator(ruler, {ruler.judge_model: ep})
print(sorted(m for m in ("art", "litellm") if m in sys.modules))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-3000:]
    before, after = out.stdout.strip().splitlines()[-2:]
    assert before == "[]"
    assert after == "['litellm']"


# --- a new kind, registered here only --------------------------------------------------------


class LengthSettings(EvaluatorSettings):
    protocol = "rule"
    evaluator = f"{__name__}:LengthEvaluator"
    kind: Literal["length"] = "length"
    max_chars: int = Field(20, ge=1)


class LengthEvaluator(PointwiseEvaluator):
    """Prefers short answers: 1.0 up to max_chars, 0.0 from twice that."""

    protocol = "rule"
    spec: LengthSettings

    def score_one(self, task: Task, candidate: Candidate, repeat: int = 0) -> Verdict:
        n = len(candidate.completion)
        if not n:
            return Verdict.unscored("empty completion")
        return Verdict.scored(min(1.0, max(0.0, 2.0 - n / self.spec.max_chars)))


def _params(**length: object) -> dict:
    return {
        "models": {"qwen-0.5b": {"kind": "embedded", "zoo": "qwen2.5-coder-0.5b-instruct",
                                 "family": "qwen"}},
        "scores": {"repeats": 3, "evaluators": [{"name": "short", "kind": "length", **length}]},
    }  # fmt: skip


def test_a_new_kind_is_configured_in_params_and_scored(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="unknown evaluator kind 'length'"):
        parse_settings(_params())
    monkeypatch.setitem(SETTINGS, "length", LengthSettings)

    with pytest.raises(ConfigError, match=r"scores\.evaluators\.0\.max_char: unknown key"):
        parse_settings(_params(max_char=10))
    with pytest.raises(ConfigError, match=r"scores\.evaluators\.0\.max_chars: Input should be"):
        parse_settings(_params(max_chars=0))
    settings = parse_settings(_params(max_chars=10))
    (spec,) = settings.scores.evaluators
    assert isinstance(spec, LengthSettings) and spec.max_chars == 10
    assert spec.judge_model is None and spec.repeats(settings.scores.repeats) == 1
    assert settings.scores.model_dump()["evaluators"][0]["max_chars"] == 10

    evaluator = build_evaluator(spec, {})
    assert isinstance(evaluator, LengthEvaluator) and evaluator.spec is spec
    task = Task(task_id="t0", source="autorl", prompt="p")
    cands = [Candidate("t0", f"c{i}", i, text) for i, text in enumerate(["x" * 5, "x" * 15, ""])]
    rows = score_group("run", evaluator, task, cands, 0)
    frame = scores_frame(rows)
    assert frame["evaluator"].to_list() == ["short"] * 3
    assert frame["protocol"].to_list() == ["rule"] * 3
    assert frame["judge"].to_list() == [None] * 3
    assert frame["score"].to_list() == [1.0, 0.5, None]
    assert frame["status"].to_list() == ["scored", "scored", "unscored"]
