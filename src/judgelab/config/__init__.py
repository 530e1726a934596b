"""params.yaml -> typed, validated settings: the only reader of params.yaml. One module per
section, each beside the others here; this face hands on what the rest of judgelab imports.
Every section is a frozen pydantic model that forbids unknown keys (`Section`); errors name
the dotted key that is wrong and, where there is a fixed set, the valid choices."""

from judgelab.config.analysis import (
    AnalysisSettings,
    PowerSettings,
    RejectSettings,
    TrackingSettings,
)
from judgelab.config.evaluators import EvaluatorSettings, EvaluatorSpec, ExecutionSettings
from judgelab.config.models import (
    DEFAULT_ENDPOINT_CONCURRENCY,
    EMBEDDED_CONCURRENCY,
    PRICE_KEYS,
    RATE_LIMIT_KEYS,
    ZOO_NAMES,
    EmbeddedModel,
    EndpointModel,
    ModelSpec,
    RunnerSettings,
    ServerSettings,
)  # fmt: skip
from judgelab.config.probes import (
    ATTACK_KINDS,
    FAILING_ATTACKS,
    MUTANT_KINDS,
    PERTURBATION_KINDS,
    SEMANTIC_EDITS,
    ProbesSettings,
)  # fmt: skip
from judgelab.config.rollouts import EXPERIMENT_SYSTEM_PROMPT, RolloutSettings
from judgelab.config.scores import ScoresSettings
from judgelab.config.settings import Settings, load_settings, parse_settings
from judgelab.config.tasks import (
    AUTORL_DESCRIPTION,
    AutoRLSettings,
    CodeIOSettings,
    HumanEvalSettings,
    TasksSettings,
)  # fmt: skip
from judgelab.config.training import HeldOutSettings, LoraSettings, LossSettings, TrainSettings

__all__ = [
    "ATTACK_KINDS", "AUTORL_DESCRIPTION", "DEFAULT_ENDPOINT_CONCURRENCY", "EMBEDDED_CONCURRENCY",
    "EXPERIMENT_SYSTEM_PROMPT", "FAILING_ATTACKS", "MUTANT_KINDS", "PERTURBATION_KINDS",
    "PRICE_KEYS", "RATE_LIMIT_KEYS", "SEMANTIC_EDITS", "ZOO_NAMES", "AnalysisSettings",
    "AutoRLSettings", "CodeIOSettings", "EmbeddedModel", "EndpointModel", "EvaluatorSettings",
    "EvaluatorSpec", "ExecutionSettings", "HeldOutSettings", "HumanEvalSettings", "LoraSettings",
    "LossSettings", "ModelSpec", "PowerSettings", "ProbesSettings", "RejectSettings",
    "RolloutSettings", "RunnerSettings", "ScoresSettings", "ServerSettings", "Settings",
    "TasksSettings", "TrackingSettings", "TrainSettings", "load_settings", "parse_settings",
]  # fmt: skip
