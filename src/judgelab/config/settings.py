"""The whole of params.yaml (`Settings`): each stage's section, checked against the others
(every model and evaluator a section names exists), and `load_settings`, the one reader of
the file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
    model_validator,
)

from judgelab.config import evaluators as evaluator_roles
from judgelab.config.analysis import AnalysisSettings, TrackingSettings
from judgelab.config.evaluators import EvaluatorSettings, ExecutionSettings
from judgelab.config.models import (
    CacheSettings,
    EmbeddedModel,
    EndpointModel,
    ModelSpec,
    RunnerSettings,
    ServerSettings,
)
from judgelab.config.probes import ProbesSettings
from judgelab.config.rollouts import RolloutSettings
from judgelab.config.scores import ScoresSettings
from judgelab.config.section import Section
from judgelab.config.tasks import TasksSettings
from judgelab.config.training import TrainSettings
from judgelab.errors import ConfigError

log = logging.getLogger(__name__)


class Settings(Section):
    models: dict[str, ModelSpec]
    server: ServerSettings = ServerSettings()
    runner: RunnerSettings = RunnerSettings()
    cache: CacheSettings = CacheSettings()
    tasks: TasksSettings = TasksSettings()
    rollouts: RolloutSettings = RolloutSettings()
    scores: ScoresSettings
    train: TrainSettings = TrainSettings()
    analysis: AnalysisSettings = AnalysisSettings()
    tracking: TrackingSettings = TrackingSettings()
    probes: ProbesSettings = ProbesSettings()

    @model_validator(mode="after")
    def _known_models(self) -> Settings:
        known = sorted(self.models)
        refs = []  # a model is checked only where it is used
        if self.rollouts.candidates is None:  # imported candidates: no policy is sampled
            if self.rollouts.policies is None:
                refs.append(("rollouts.policy", self.rollouts.policy))
            else:
                refs += [
                    (f"rollouts.policies[{i}]", p) for i, p in enumerate(self.rollouts.policies)
                ]
        if self.tasks.autorl.enabled and self.tasks.autorl.n:
            refs.append(("tasks.autorl.model", self.tasks.autorl.model))
        refs += [
            (f"scores.evaluators[{i}].judge ({ev.name})", ev.judge_model)
            for i, ev in enumerate(self.scores.evaluators)
            if ev.judge_model is not None
        ]
        if self.train.rewards:  # the policy matters only when something is trained
            refs.append(("train.policy", self.train.policy))
        refs += [(f"probes.policies[{i}]", p) for i, p in enumerate(self.probes.policies)]
        for where, name in refs:
            if name not in self.models:
                raise ValueError(f"{where}: unknown model {name!r}; known models: {known}")
        evaluators = [ev.name for ev in self.scores.evaluators]
        for i, name in enumerate(self.train.rewards):
            if name not in evaluators:
                raise ValueError(
                    f"train.rewards[{i}]: unknown evaluator {name!r}; configured: {evaluators}"
                )
        if len(set(self.train.rewards)) != len(self.train.rewards):
            raise ValueError("train.rewards: a judge is listed twice")
        if self.train.rewards and not isinstance(self.models[self.train.policy], EmbeddedModel):
            raise ValueError(
                f"train.policy: {self.train.policy!r} must be an embedded model "
                "(training loads its GGUF weights)"
            )
        judges = {ev.name for ev in self.scores.evaluators if ev.judge_model is not None}
        for i, name in enumerate(self.probes.judges):
            if name not in judges:
                raise ValueError(
                    f"probes.judges[{i}]: {name!r} is not a RULER/rubric evaluator in "
                    f"scores.evaluators; valid: {sorted(judges)}"
                )
        executions = sorted(ev.name for ev in evaluator_roles.executions(self.scores.evaluators))
        if self.analysis.truth is not None and self.analysis.truth not in executions:
            raise ValueError(
                f"analysis.truth: {self.analysis.truth!r} is not an execution evaluator in "
                f"scores.evaluators; valid: {executions}"
            )
        has_truth = bool(executions)
        if judges and not has_truth:  # a judge-only audit: allowed (issue 29)
            log.warning(
                "scores.evaluators: judges %s but no execution evaluator: a judge-only audit. "
                "The report gives score distributions, unscored and out-of-range rates, "
                "zero-advantage rates and agreement between judges; nothing is ranked against "
                "the tests (add {name: execution, kind: execution} for that)",
                sorted(judges),
            )
        return self

    @classmethod
    def from_dict(cls, data: Any, source: str = "settings") -> Settings:
        """Settings from a mapping of params.yaml's sections, validated as the file is: an
        error names `source` and the dotted key (the Python API's way in)."""
        return parse_settings(data, source)

    def model(self, name: str) -> EmbeddedModel | EndpointModel:
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(
                f"unknown model {name!r}; known models: {sorted(self.models)}"
            ) from None

    def evaluator(self, name: str) -> EvaluatorSettings:
        for ev in self.scores.evaluators:
            if ev.name == name:
                return ev
        names = [ev.name for ev in self.scores.evaluators]
        raise ConfigError(f"unknown evaluator {name!r}; configured: {names}")

    def truth(self) -> ExecutionSettings | None:
        """The execution evaluator whose verdicts are the truth: the one `analysis.truth`
        names, else the first by name; None in a judge-only audit."""
        found = sorted(evaluator_roles.executions(self.scores.evaluators), key=lambda e: e.name)
        named = [e for e in found if e.name == self.analysis.truth]
        return (named or found or [None])[0]

    def test_runner(self) -> ExecutionSettings:
        """How the stages that run the tests themselves (training's pass rate, the probes'
        known-truth checks) run them: as the truth does, else the execution kind's defaults."""
        return self.truth() or evaluator_roles.DEFAULT_EXECUTION

    def self_preference_policies(self) -> list[str]:
        """Models that write the probes' self-preference candidates: probes.policies, else
        every registry model."""
        return list(self.probes.policies or self.models)

    def models_called(self, stage: str) -> list[str]:
        """Registry names of the models `stage` (a stage table name) serves and calls, each
        once, in the order of first use: what its preflight checks API keys of, its flow
        serves and its lanes are made of. The training stage's policy is loaded into
        transformers, not served, so it is not among them; the analysis calls no model."""
        autorl = self.tasks.autorl
        called: dict[str, list[str | None]] = {
            "tasks": [autorl.model] if autorl.enabled and autorl.n else [],
            # imported candidates: no policy is sampled
            "rollouts": self.rollouts.writers if self.rollouts.candidates is None else [],
            "scores": [ev.judge_model for ev in self.scores.evaluators],
            "training": [self.evaluator(name).judge_model for name in self.train.rewards],
            "analysis": [],
            "probes": [self.evaluator(name).judge_model for name in self.probes.judges]
            + (self.self_preference_policies() if self.probes.self_preference else []),
        }
        called["pipeline"] = [
            m for s in ("tasks", "rollouts", "scores", "training") for m in called[s]
        ]
        if stage not in called:
            raise ConfigError(f"unknown stage {stage!r}; stages: {list(called)}")
        return list(dict.fromkeys(m for m in called[stage] if m is not None))


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"{source} is invalid:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown key (not a setting; check the spelling)"
        lines.append(f"  - {loc or '<root>'}: {msg}")
    return "\n".join(lines)


def parse_settings(data: Any, source: str = "params.yaml") -> Settings:
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a mapping of sections, got {type(data).__name__}")
    try:
        return Settings.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, source)) from None


def load_settings(path: Path | str = "params.yaml") -> Settings:
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path} not found (run judgelab from the project root)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from None
    return parse_settings(data, str(path))
