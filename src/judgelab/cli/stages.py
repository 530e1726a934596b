"""`judgelab tasks|rollouts|scores|train|analysis|probe|pipeline`: each runs a Prefect flow."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import typer

from judgelab.errors import JudgelabError

PARAMS = typer.Option(Path("params.yaml"), "--params", "-p", help="Parameters file.")


# One line per HTTP request (httpx) and LiteLLM's banners drowned a run's log (about 600 of
# its 630 lines); they show with `judgelab -v`.
CHATTY_LOGGERS = ("httpx", "httpcore", "LiteLLM", "litellm")


class QuietLibraries(logging.Filter):
    """Drops the chatty libraries' records below WARNING. A handler filter, not a logger
    level: litellm sets its loggers' levels itself when it is imported."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or not record.name.startswith(CHATTY_LOGGERS)


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if os.environ.get("JUDGELAB_VERBOSE") != "1":
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, QuietLibraries) for f in handler.filters):
                handler.addFilter(QuietLibraries())


def _run(fn_name: str, module: str, **kwargs: object) -> None:
    configure_logging()
    import importlib

    try:
        preflight(fn_name.removesuffix("_flow"), Path(str(kwargs["params"])))
        flow = getattr(importlib.import_module(module), fn_name)
        from judgelab.deploy import temporary_prefect_server

        # the user's server if PREFECT_API_URL names one, else ours: it ends with this
        # process, even by kill -9
        user_server = bool(os.environ.get("PREFECT_API_URL"))
        with contextlib.nullcontext() if user_server else temporary_prefect_server():
            flow(**kwargs)
    except JudgelabError as err:
        typer.secho(f"error: {err}", fg="red", err=True)
        raise typer.Exit(2) from None


# The tables each stage reads (a pipeline run makes its own).
STAGE_INPUTS = {
    "rollouts": ("tasks",),
    "scores": ("tasks", "rollouts"),
    "training": ("tasks",),
    "analysis": ("tasks", "rollouts", "scores"),
}


def preflight(stage: str, params: Path) -> None:
    """Fail in a second, before any flow or model starts, on what would fail the stage later:
    invalid params, a model whose API-key variable is unset, an input table with bad rows.
    Nothing is written, so no partial artefact can look complete."""
    from judgelab.config import EndpointModel, load_settings
    from judgelab.errors import ConfigError
    from judgelab.schemas import validate_file
    from judgelab.scoring import judge_names

    settings = load_settings(params)
    needed = {
        "tasks": [settings.tasks.autorl.model] if settings.tasks.autorl.enabled else [],
        "rollouts": [settings.rollouts.policy],
        "scores": judge_names(settings),
        "training": [
            m for j in settings.train.judges if (m := settings.evaluator(j).judge_model) is not None
        ],
    }
    names = [n for st, ns in needed.items() if stage in (st, "pipeline") for n in ns]
    for name in dict.fromkeys(names):
        spec = settings.model(name)
        key_env = spec.api_key_env if isinstance(spec, EndpointModel) else None
        if key_env and not os.environ.get(key_env):
            raise ConfigError(
                f"models.{name}.api_key_env: environment variable {key_env} is not set "
                f"(the {stage} stage needs model {name!r})"
            )
    from flows import paths

    for kind in STAGE_INPUTS.get(stage, ()):
        validate_file(getattr(paths, kind.upper()), kind)


def register(app: typer.Typer) -> None:
    @app.command()
    def tasks(params: Path = PARAMS) -> None:
        """Freeze the coding tasks: HumanEval subset + AutoRL requests written by the policy."""
        _run("tasks_flow", "flows.tasks", params=params)

    @app.command()
    def rollouts(params: Path = PARAMS) -> None:
        """Sample k candidate solutions per task from the policy (cached, resumable)."""
        _run("rollouts_flow", "flows.rollouts", params=params)

    @app.command()
    def scores(params: Path = PARAMS) -> None:
        """Score every group with every evaluator (rules, execution, RULER, rubric)."""
        _run("scores_flow", "flows.scores", params=params)

    @app.command()
    def train(params: Path = PARAMS) -> None:
        """GRPO with LoRA: one policy per judge in train.judges, resumable, per-epoch history."""
        _run("training_flow", "flows.training", params=params)

    @app.command()
    def analysis(params: Path = PARAMS) -> None:
        """Judge statistics, agreement with execution truth, plots, report, MLflow run."""
        _run("analysis_flow", "flows.analysis", params=params)

    @app.command()
    def probe(params: Path = PARAMS) -> None:
        """Bias probes of the judges (params.yaml `probes:`): known truth, position,
        perturbation, self-preference, agreement -> data/probes/ (tables, metrics.json,
        report.md, plots). Not part of `dvc repro`; also `dvc repro probes/dvc.yaml`."""
        from judgelab.config import load_settings
        from judgelab.probes.run import require_judges

        try:  # before Prefect starts: a config error should not wait for a flow server
            require_judges(load_settings(params))
        except JudgelabError as err:
            typer.secho(f"error: {err}", fg="red", err=True)
            raise typer.Exit(2) from None
        _run("probe_flow", "flows.probe", params=params)

    @app.command()
    def pipeline(params: Path = PARAMS) -> None:
        """Run the whole chain in one Prefect flow (dvc repro runs the stages one by one)."""
        _run("pipeline_flow", "flows.pipeline", params=params)
