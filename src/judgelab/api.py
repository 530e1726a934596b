"""judgelab from Python: an audit of your judges on tasks and candidates held in memory, the
CLI's stages as functions, and typed results. `import judgelab` exports these names lazily.

    import judgelab

    def short(prompts, completions, **kwargs):  # TRL's reward signature
        return [1.0 if len(c) < 300 else 0.0 for c in completions]

    result = judgelab.audit(tasks, candidates, judges=[short], out_dir="my-audit")
    result.decision.verdict, result.metrics, result.scores, result.report

The stages, as the CLI runs them (`judgelab tasks|rollouts|scores|analysis`):

    load_tasks(records | None, settings)            -> the tasks table (polars)
    load_candidates(tasks, candidates | None, settings) -> the rollouts table
    score(tasks, rollouts, settings)                 -> the scores table
    analyse(tasks, rollouts, scores, settings, out_dir) -> AuditResult
    audit(...)                                       -> the four in order: AuditResult

Settings are params.yaml's, built in code and validated as the file is (`make_settings`,
`Settings.from_dict`): an error names the dotted key. A judge is an evaluator of
`scores.evaluators`: a spec mapping (``{"name": "ruler-mine", "kind": "ruler", "judge":
"my-endpoint"}`` with the model in `models`), a built-in kind by name ("syntax"), a reward
function's "package.module:function", or a Python callable with TRL's reward signature, which
becomes a `reward` evaluator registered under its ``__name__`` (`judgelab.evaluators.reward`:
the one place a custom reward is registered). Tasks and candidates may also be files' paths
(docs/TASKS.md's formats): `judgelab audit` (`judgelab_cli.audit`) is this function on files.

Everything runs in this process, one group at a time, through the library functions the
stages' Prefect flows call: no Prefect server, no DVC, no MLflow run (those are the CLI's).
Judge calls and policy samples go through the caches under the project root (`.cache/`), so
a repeated audit calls no model again. A judge whose calls failed beyond
`scores.max_failure_share` does not raise here, as the scores stage does: its failures are
in `AuditResult.failures` and the report's first section.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from judgelab.config import Settings, load_settings, parse_settings
from judgelab.config.evaluators import EvaluatorSettings
from judgelab.errors import ConfigError

if TYPE_CHECKING:
    import polars as pl

# What a call needs is imported when it is called (polars, pandera, the judges' openai and
# litellm, scipy, the report's plotting): `import judgelab.api` brings only pydantic, the
# settings and PyYAML, so a trainer reaches `judgelab.audit` in well under 2 s
# (tests/unit/test_slim_imports.py holds it to that set).

log = logging.getLogger(__name__)

# `rollouts.candidates` of settings whose candidates were given in memory: no policy is
# sampled, so none need be configured (`Settings` checks the policy only when it samples).
IN_MEMORY = "<in memory>"

Judge = Callable[..., Any] | Mapping[str, Any] | EvaluatorSettings | str
Candidates = Mapping[str, Iterable[str]] | Iterable[Mapping[str, Any]] | str | Path
SettingsLike = Settings | Mapping[str, Any] | str | Path | None


def make_settings(
    settings: SettingsLike = None,
    judges: Iterable[Judge] = (),
    *,
    tests: bool = True,
    in_memory_tasks: bool = True,
    in_memory_candidates: bool = True,
) -> Settings:
    """Settings as params.yaml would give them, validated as the file is: `settings` is a
    `Settings`, a mapping of params.yaml's sections, a params file's path, or None (no models,
    no evaluators). `judges` join `scores.evaluators` (module docstring); `tests` adds the
    execution evaluator, the truth, when none is configured. Tasks given in memory need no
    AutoRL writer (`in_memory_tasks` turns it off unless `tasks.autorl` is set), candidates
    given in memory no policy (`in_memory_candidates`: `rollouts.candidates` is `IN_MEMORY`
    unless a candidates file is set), so settings without `models` validate; a policy that
    samples is still checked when it is served."""
    data, source = _as_dict(settings)
    data.setdefault("models", {})
    scores = dict(data.get("scores") or {})
    evaluators = [*scores.get("evaluators", []), *(_spec(j) for j in judges)]
    kinds = {
        e.kind if isinstance(e, EvaluatorSettings) else e.get("kind")
        for e in evaluators
        if isinstance(e, EvaluatorSettings | Mapping)  # anything else: the settings say why
    }
    if tests and "execution" not in kinds:
        evaluators.append({"name": "execution", "kind": "execution"})
    data["scores"] = {**scores, "evaluators": evaluators}
    tasks = dict(data.get("tasks") or {})
    if in_memory_tasks and "autorl" not in tasks:
        data["tasks"] = {**tasks, "autorl": {"enabled": False}}
    rollouts = dict(data.get("rollouts") or {})
    if in_memory_candidates and not {"candidates", "extra_candidates"} & set(rollouts):
        data["rollouts"] = {**rollouts, "candidates": IN_MEMORY}
    return parse_settings(data, source)


def _resolve(settings: SettingsLike, **kw: Any) -> Settings:
    """`settings` as they are when they are `Settings`, else `make_settings(settings, **kw)`."""
    return settings if isinstance(settings, Settings) else make_settings(settings, **kw)


def _as_dict(settings: SettingsLike) -> tuple[dict[str, Any], str]:
    if settings is None:
        return {}, "settings"
    if isinstance(settings, Settings):
        return settings.model_dump(mode="json", exclude_unset=True), "settings"
    if isinstance(settings, str | Path):
        path = Path(settings)
        load_settings(path)  # the file's own errors first, naming it
        return yaml.safe_load(path.read_text(encoding="utf-8")), str(path)
    if isinstance(settings, Mapping):
        return dict(settings), "settings"
    raise ConfigError(
        f"settings: a Settings, a mapping or a params file's path, not {type(settings).__name__}"
    )


def _spec(judge: Judge) -> Any:
    """One `scores.evaluators` entry from a judge as `audit` takes it."""
    from judgelab.evaluators.reward import register_reward

    if isinstance(judge, EvaluatorSettings | Mapping):
        return judge
    if isinstance(judge, str) and ":" in judge:  # a reward function, "module:function"
        return {"name": judge.rpartition(":")[2], "kind": "reward", "function": judge}
    if isinstance(judge, str):  # a kind that needs no setting: format, syntax, execution
        return {"name": judge, "kind": judge}
    if callable(judge):
        name = getattr(judge, "__name__", "")
        if not name.isidentifier():
            raise ConfigError(
                f"judges: {judge!r} has no name to be an evaluator by; define it with def, or "
                "give {'name': ..., 'kind': 'reward', 'function': "
                "judgelab.register_reward(name, fn)}"
            )
        return {"name": name, "kind": "reward", "function": register_reward(name, judge)}
    raise ConfigError(
        f"judges: {judge!r} is not a reward function, an evaluator spec or a kind's name"
    )


def load_tasks(
    tasks: Iterable[Any] | str | Path | None = None, settings: SettingsLike = None
) -> pl.DataFrame:
    """The tasks table (`judgelab tasks`): `tasks` given in memory, each a mapping with a
    task file's fields (docs/TASKS.md: task_id, request, prompt, entry_point, test or tests,
    canonical_solution) or a `Task`; a task file's path; None: the task sources
    `settings.tasks` enables (AutoRL requests, which a model writes, are the CLI's)."""
    from judgelab.paths import project_root
    from judgelab.tasks import tasks_frame
    from judgelab.tasks.files import load_task_file, tasks_from_records
    from judgelab.tasks.registry import load_sources

    if isinstance(tasks, str | Path):
        return tasks_frame(load_task_file(Path(tasks), "tasks"))
    if tasks is not None:
        return tasks_frame(tasks_from_records(tasks))
    loaded, _ = load_sources(_resolve(settings, tests=False).tasks, project_root())
    return tasks_frame(loaded)


def load_candidates(
    tasks: pl.DataFrame, candidates: Candidates | None = None, settings: SettingsLike = None
) -> pl.DataFrame:
    """The rollouts table (`judgelab rollouts`): `candidates` given in memory, as {task_id:
    [completion, ...]} or records with a candidates file's fields (task_id, completion,
    policy, messages), each task's group in the order given; a candidates file's path; None:
    the candidates file `rollouts.candidates` names, else k samples per task from each
    policy (cached)."""
    from judgelab.paths import project_root
    from judgelab.rollouts.generate import rollouts_frame
    from judgelab.rollouts.imported import import_candidates, records_candidates
    from judgelab.schemas import TasksSchema, validate
    from judgelab.tasks import tasks_from_frame

    s = _resolve(settings, tests=False)
    task_list = tasks_from_frame(validate(tasks, TasksSchema, "tasks table"))
    if isinstance(candidates, str | Path):
        rows = import_candidates(Path(candidates), "candidates", task_list, s.rollouts)
    elif candidates is not None:
        if isinstance(candidates, Mapping):
            candidates = [
                {"task_id": task_id, "completion": c}
                for task_id, group in candidates.items()
                for c in ([group] if isinstance(group, str) else group)
            ]
        rows = records_candidates(candidates, "candidates", task_list, s.rollouts)
    elif s.rollouts.candidates is not None and s.rollouts.candidates != IN_MEMORY:
        path = project_root() / s.rollouts.candidates
        rows = import_candidates(path, "rollouts.candidates", task_list, s.rollouts)
    else:
        rows = _sample(s, task_list)
    return rollouts_frame(rows)


def _sample(settings: Settings, task_list: list[Any]) -> list[dict[str, Any]]:
    """k samples per task from each writer, writer-major, as the rollouts flow draws them."""
    from judgelab.cache import JsonCache
    from judgelab.models.server import serve
    from judgelab.paths import cache_dir
    from judgelab.rollouts.generate import distinct_writers, generate_group

    rollouts, writers = settings.rollouts, settings.rollouts.writers
    cache = JsonCache(cache_dir(), "completions")
    with serve(settings, writers) as endpoints:
        distinct_writers({w: endpoints[w] for w in writers})
        return [
            row
            for n, w in enumerate(writers)
            for t in task_list
            for row in generate_group(rollouts, t, endpoints[w], cache, n * rollouts.k)
        ]


def score(
    tasks: pl.DataFrame, rollouts: pl.DataFrame, settings: SettingsLike = None
) -> pl.DataFrame:
    """The scores table (`judgelab scores`): every evaluator of `scores.evaluators` over every
    group, one row per (task, candidate, evaluator, repeat): the scores flow's body
    (`judgelab.scores_stage.score_stage`), its calls made one at a time in this process and
    the table returned, not written."""
    from judgelab.scores_stage import score_stage  # the flow's body, made in this process

    return score_stage(_resolve(settings, tests=False), tasks, rollouts).frame


@dataclass(frozen=True)
class Decision:
    """The decision the audit supports (`judgelab.analysis.decision.decide`): `verdict` is
    "judge" (use `judge`), "cannot_tell" (`contenders` could each be first), "no_judge"
    (every judge rejected) or "no_ranking"; "equivalent" (the contenders are shown equivalent
    within `analysis.margin`); `rejected`: each rejected judge's rules (docs/METRICS.md, "A
    rule for rejecting a judge"; their tests in `raw["rejected"]`); `tests_beat`: the judges
    the tests beat by a CI."""

    verdict: str
    judge: str | None
    primary: str
    acceptable: list[str]
    contenders: list[str]
    rejected: dict[str, list[str]]
    tests_beat: list[str]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, decision: Mapping[str, Any]) -> Decision:
        return cls(
            verdict=decision["verdict"],
            judge=decision.get("judge"),
            primary=decision["primary"],
            acceptable=list(decision.get("acceptable") or []),
            contenders=list(decision.get("contenders") or []),
            rejected={k: list(v) for k, v in (decision.get("rejected") or {}).items()},
            tests_beat=list(decision.get("tests_beat") or []),
            raw=dict(decision),
        )


@dataclass(frozen=True)
class AuditResult:
    """What an audit wrote and found: `metrics` is metrics.json as written (docs/METRICS.md),
    `decision` its decision, `tasks`/`rollouts`/`scores` the tables it read, `report` the
    path of report.md (report.html beside it), `failures` one line per judge whose calls
    failed beyond `scores.max_failure_share`."""

    metrics: dict[str, Any] = field(repr=False)
    decision: Decision
    tasks: pl.DataFrame = field(repr=False)
    rollouts: pl.DataFrame = field(repr=False)
    scores: pl.DataFrame = field(repr=False)
    out_dir: Path
    settings: Settings = field(repr=False)
    failures: list[str] = field(default_factory=list)

    @property
    def report(self) -> Path:
        return self.out_dir / "report.md"

    @property
    def report_html(self) -> Path:
        return self.out_dir / "report.html"

    def evaluator(self, name: str) -> dict[str, Any]:
        """One evaluator's figures in metrics.json (its truth agreement under "truth")."""
        evaluators = self.metrics["evaluators"]
        if name not in evaluators:
            raise KeyError(f"no evaluator {name!r} in the audit; audited: {sorted(evaluators)}")
        return evaluators[name]  # type: ignore[no-any-return]


def analyse(
    tasks: pl.DataFrame,
    rollouts: pl.DataFrame,
    scores: pl.DataFrame,
    settings: SettingsLike = None,
    out_dir: Path | str = "judgelab-audit",
    *,
    training_dir: Path | None = None,
    probes_metrics: Path | None = None,
    provenance: dict[str, Any] | None = None,
) -> AuditResult:
    """The analysis (`judgelab analysis` without its MLflow run: the function its flow runs,
    `judgelab.report.outputs.analyse_stage`): metrics.json, plots and report.md/html under
    `out_dir`. `provenance` (the report's last line) defaults to the
    commit of the project root, the settings' sha256 and the models' fingerprints."""
    from judgelab.paths import project_root
    from judgelab.report.outputs import analyse_stage

    s = _resolve(settings, tests=False)
    out = Path(out_dir)
    metrics = analyse_stage(
        tasks,
        rollouts,
        scores,
        s,
        out,
        root=project_root(),
        training_dir=training_dir,
        probes_metrics=probes_metrics,
        provenance=provenance if provenance is not None else settings_provenance(s),
    )
    return AuditResult(
        metrics=metrics,
        decision=Decision.of(metrics["decision"]),
        tasks=tasks,
        rollouts=rollouts,
        scores=scores,
        out_dir=out,
        settings=s,
        failures=list(metrics.get("judge_failures") or []),
    )


def settings_provenance(settings: Settings) -> dict[str, Any]:
    """What a report computed from settings built in code was computed from: as
    `judgelab.provenance.provenance` gives for a params file, the file's hash replaced by the
    settings' own."""
    from judgelab.paths import project_root
    from judgelab.provenance import git_commit, model_fingerprints

    text = json.dumps(settings.model_dump(mode="json"), sort_keys=True)
    models = sorted({m for stage in ("rollouts", "scores") for m in settings.models_called(stage)})
    return {
        "git": git_commit(project_root()),
        "params": "settings given in code",
        "params_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "models": model_fingerprints(settings, models),
    }


def audit(
    tasks: Iterable[Any] | str | Path | None = None,
    candidates: Candidates | None = None,
    *,
    judges: Iterable[Judge] = (),
    settings: SettingsLike = None,
    out_dir: Path | str = "judgelab-audit",
    tests: bool = True,
) -> AuditResult:
    """Audit `judges` (module docstring) on `tasks` and `candidates` (None: as `load_tasks`
    and `load_candidates` say), against the tasks' tests when `tests` (the execution
    evaluator joins the judges unless one is configured): the tasks, rollouts, scores and
    analysis stages in order, the report under `out_dir`."""
    s = make_settings(
        settings,
        judges,
        tests=tests,
        in_memory_tasks=tasks is not None,
        in_memory_candidates=candidates is not None,
    )
    task_table = load_tasks(tasks, s)
    rollouts = load_candidates(task_table, candidates, s)
    scores = score(task_table, rollouts, s)
    return analyse(task_table, rollouts, scores, s, out_dir)
