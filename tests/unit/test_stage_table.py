"""dvc.yaml and probes/dvc.yaml agree with the stage table (judgelab.flows.stages): each stage's
command, the tables it reads and writes, its flow's module and its params. And the params
are narrow: a knob reruns the stages that read it, and no other (DVC's own status says so)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from judgelab.config import Settings
from judgelab.flows.paths import PROBES_METRICS, SCHEMAS
from judgelab.flows.stages import PIPELINE, PIPELINE_STAGES, STAGES, Stage
from judgelab.schemas import SCHEMAS as TABLE_SCHEMAS

ROOT = Path(__file__).resolve().parents[2]
DVC_STAGES = [s for s in STAGES if s.dvc_file is not None]


def dvc_file(path: Path) -> dict[str, Any]:
    return yaml.safe_load((ROOT / path).read_text())["stages"]


def dvc_stage(stage: Stage) -> dict[str, Any]:
    assert stage.dvc_file is not None
    return dvc_file(stage.dvc_file)[stage.name]


def entries(body: dict[str, Any], key: str) -> list[str]:
    """Paths listed under deps/outs/metrics/plots (an entry may carry options)."""
    return [e if isinstance(e, str) else next(iter(e)) for e in body.get(key) or []]


def test_every_dvc_stage_is_in_the_table() -> None:
    for path in (Path("dvc.yaml"), Path("probes/dvc.yaml")):
        in_table = sorted(s.name for s in DVC_STAGES if s.dvc_file == path)
        assert sorted(dvc_file(path)) == in_table, path


def test_names_and_commands_are_unique() -> None:
    commands = [s.command for s in STAGES]
    assert len({s.name for s in STAGES}) == len(STAGES)
    assert len(set(commands)) == len(commands)


@pytest.mark.parametrize("stage", PIPELINE_STAGES, ids=lambda s: s.name)
def test_a_dvc_yaml_stage_runs_the_command_of_its_name(stage: Stage) -> None:
    """`dvc repro training` runs `judgelab training`."""
    assert stage.command == stage.name


@pytest.mark.parametrize("stage", DVC_STAGES, ids=lambda s: s.name)
def test_dvc_stage_matches_the_table(stage: Stage) -> None:
    body = dvc_stage(stage)
    if stage.dvc_file != Path("dvc.yaml"):
        assert body["wdir"] == "..", "paths in the table are relative to the project root"
    assert body["cmd"] == f"judgelab {stage.command}"
    deps = entries(body, "deps")
    assert sorted(d for d in deps if d.startswith("data/")) == sorted(map(str, stage.reads))
    assert {str(p) for p in stage.watches} <= set(deps)
    flow_file = Path(inspect.getsourcefile(stage.flow().fn)).relative_to(ROOT)
    assert str(flow_file) in deps, f"{stage.name} must depend on its flow's module"
    written = entries(body, "outs") + entries(body, "metrics") + entries(body, "plots")
    assert sorted(written) == sorted(map(str, stage.writes))
    assert body["params"] == list(stage.params)


@pytest.mark.parametrize("stage", DVC_STAGES, ids=lambda s: s.name)
def test_flow_defaults_are_the_tables_paths(stage: Stage) -> None:
    """The flow reads what the table says by default, and writes under its `out`."""
    parameters = inspect.signature(stage.flow().fn).parameters
    inputs = {p.default for n, p in parameters.items() if n not in ("params", "out")}
    assert inputs == set(stage.reads)
    out = parameters["out"].default
    assert all(w == out or out in w.parents for w in stage.writes), (out, stage.writes)


def test_the_pipeline_chains_the_dvc_yaml_stages() -> None:
    source = inspect.getsource(PIPELINE.flow().fn)
    called = [s for s in PIPELINE_STAGES if f"{s.flow().fn.__name__}(" in source]
    assert called == list(PIPELINE_STAGES)
    assert PIPELINE.dvc_file is None and not PIPELINE.reads


def test_read_tables_have_schemas() -> None:
    assert set(SCHEMAS.values()) <= set(TABLE_SCHEMAS)


def key_exists(model: type[BaseModel], dotted: str) -> bool:
    head, _, rest = dotted.partition(".")
    field = model.model_fields.get(head)
    if field is None:
        return False
    if not rest:
        return True
    sub = field.annotation
    return isinstance(sub, type) and issubclass(sub, BaseModel) and key_exists(sub, rest)


@pytest.mark.parametrize("stage", DVC_STAGES, ids=lambda s: s.name)
def test_params_are_settings_and_in_params_yaml(stage: Stage) -> None:
    """Each is a setting, and written in params.yaml: DVC fails a stage whose listed param
    is missing from the file, defaults notwithstanding."""
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    for key in stage.params:
        assert key_exists(Settings, key), f"{stage.name}: {key} is not a setting"
        value: Any = shipped
        for part in key.split("."):
            assert isinstance(value, dict) and part in value, f"{key} is not in params.yaml"
            value = value[part]


# ------------------------------------------------------------------ narrow dependencies


def dvc(project: Path, *args: str) -> str:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "dvc", *args],
        cwd=project, env=env, capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip


def test_a_changed_key_reruns_only_the_stages_that_read_it(tmp_path: Path) -> None:
    """Every stage of dvc.yaml and probes/dvc.yaml with its real params (commands that only
    echo, no files), run once; then one key changes and `dvc status` names the stale ones."""
    stages = {
        name: {"cmd": f"echo {name}", "params": body["params"]}
        for path in (Path("dvc.yaml"), Path("probes/dvc.yaml"))
        for name, body in dvc_file(path).items()
    }
    shipped = yaml.safe_load((ROOT / "params.yaml").read_text())
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(shipped))
    dvc(tmp_path, "init", "--no-scm", "-q")
    dvc(tmp_path, "repro", "-q")

    def stale_after(section: str, key: str, value: Any) -> set[str]:
        changed = yaml.safe_load(yaml.safe_dump(shipped))
        changed[section][key] = value
        (tmp_path / "params.yaml").write_text(yaml.safe_dump(changed))
        try:
            return set(json.loads(dvc(tmp_path, "status", "--json")))
        finally:
            (tmp_path / "params.yaml").write_text(yaml.safe_dump(shipped))

    assert json.loads(dvc(tmp_path, "status", "--json")) == {}
    assert stale_after("rollouts", "k", 8) == {"rollouts"}
    assert stale_after("rollouts", "policy", "qwen-1.5b") == {"rollouts"}
    prompt = shipped["rollouts"]["system_prompt"] + " Be brief."
    assert stale_after("rollouts", "system_prompt", prompt) == {"rollouts", "training", "probes"}
    assert stale_after("rollouts", "temperature", 0.7) == {"rollouts", "probes"}
    assert stale_after("scores", "repeats", 2) == {"scores"}
    assert stale_after("train", "k", 8) == {"training"}
    # probes.tasks and train.heldout may name CodeI/O items, built with tasks.codeio's cases
    # and seed, or tasks of your files
    built_by_id = {"tasks", "probes", "training"}
    assert stale_after("tasks", "codeio", {"enabled": False, "cases": 3}) == built_by_id
    assert stale_after("tasks", "files", ["inputs/mine.jsonl"]) == built_by_id
    assert stale_after("analysis", "truth", "execution") == {"analysis", "probes", "training"}
    assert stale_after("rollouts", "policies", ["qwen-0.5b", "qwen-1.5b"]) == {"rollouts"}
    # one minimum for every CI: the training history's alignment CIs too
    assert stale_after("analysis", "min_ci_groups", 6) == {"analysis", "probes", "training"}


def test_dvc_repro_never_runs_the_probes_but_reruns_the_analysis_after_them(
    tmp_path: Path,
) -> None:
    """Both pipeline files with their real deps, outs and params; each command only writes
    its outs (the probes' metrics from a file, so a rerun can change them). `dvc repro` must
    not run the probes (nor need their output), and after `dvc repro probes/dvc.yaml` (make
    probe) the analysis, which shows the probe metrics, is stale exactly when they changed."""
    files = {path: dvc_file(path) for path in (Path("dvc.yaml"), Path("probes/dvc.yaml"))}
    outs = {
        out for body in (b for f in files.values() for b in f.values())
        for out in entries(body, "outs") + entries(body, "metrics") + entries(body, "plots")
    }  # fmt: skip

    def write(path: str) -> str:
        """Shell that creates `path` (a folder, with a file in it, when it has no suffix)."""
        if path == str(PROBES_METRICS):
            return f"mkdir -p {Path(path).parent} && cp probe_value.json {path}"
        if Path(path).suffix:
            return f"mkdir -p {Path(path).parent} && echo {path} > {path}"
        return f"mkdir -p {path} && echo {path} > {path}/made"

    for path, stages in files.items():
        for name, body in stages.items():
            written = entries(body, "outs") + entries(body, "metrics") + entries(body, "plots")
            body["cmd"] = " && ".join([*map(write, written), f"echo {name} >> ran.txt"])
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            for dep in entries(body, "deps"):  # code and inputs: there, unchanged
                target = tmp_path / dep
                if dep in outs or target.exists():
                    continue
                if target.suffix:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(dep)
                else:
                    target.mkdir(parents=True)
                    (target / "file").write_text(dep)
        (tmp_path / path).write_text(yaml.safe_dump({"stages": stages}))
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    (tmp_path / "probe_value.json").write_text('{"judge": 1}')
    dvc(tmp_path, "init", "--no-scm", "-q")

    def ran() -> list[str]:
        log = tmp_path / "ran.txt"
        stages = log.read_text().split() if log.exists() else []
        log.unlink(missing_ok=True)
        return stages

    def stale() -> set[str]:
        return set(json.loads(dvc(tmp_path, "status", "--json", "dvc.yaml")))

    dvc(tmp_path, "repro", "-q")
    assert sorted(ran()) == sorted(files[Path("dvc.yaml")])  # every stage, not the probes
    assert not (tmp_path / PROBES_METRICS).exists() and stale() == set()

    dvc(tmp_path, "repro", "-q", "probes/dvc.yaml")
    assert ran() == ["probes"]
    assert stale() == {"analysis"}
    dvc(tmp_path, "repro", "-q")
    assert ran() == ["analysis"]

    dvc(tmp_path, "repro", "-q", "-f", "probes/dvc.yaml")  # the same results again
    assert ran() == ["probes"] and stale() == set()
    (tmp_path / "probe_value.json").write_text('{"judge": 2}')
    dvc(tmp_path, "repro", "-q", "-f", "probes/dvc.yaml")  # new results
    assert ran() == ["probes"] and stale() == {"analysis"}


# ------------------------------------------------------------------ the reference audit

REFERENCE = Path("reference/dvc.yaml")


def test_the_reference_pipeline_is_the_stage_table_rerooted() -> None:
    """reference/dvc.yaml runs every stage of dvc.yaml and probes/dvc.yaml with reference/ as
    the project root: the same commands, params and tables; code deps re-rooted at ../; every
    output kept in git (cache: false) so the committed tables and dvc.lock are the results.
    `inputs` is the reference's own (reference/inputs: its known-truth contrast groups). The
    analysis depends on the probes' metrics themselves, not on probes/ (the main pipeline's
    record of a pipeline `dvc repro` must not run): the reference runs its probes before its
    report."""
    reference = dvc_file(REFERENCE)
    assert list(reference) == [s.name for s in DVC_STAGES]
    for stage in DVC_STAGES:
        body, ref = dvc_stage(stage), reference[stage.name]
        assert "wdir" not in ref, "paths are relative to reference/, the project root"
        assert ref["cmd"] == body["cmd"]
        assert ref["params"] == body["params"]
        rerooted = {"probes": "data/probes/metrics.json", "inputs": "inputs"}
        expected = [
            rerooted[d] if d in rerooted else d if d.startswith("data/") else f"../{d}"
            for d in entries(body, "deps")
        ]
        assert entries(ref, "deps") == expected
        for key in ("outs", "metrics", "plots"):
            assert entries(ref, key) == entries(body, key), (stage.name, key)
            for entry, original in zip(ref.get(key) or [], body.get(key) or [], strict=True):
                ((path, options),) = entry.items()
                assert options.pop("cache") is False, f"{stage.name}: {path} must be in git"
                original_options = {} if isinstance(original, str) else original[path]
                original_options.pop("cache", None)
                assert options == original_options, (stage.name, path)


def test_reference_params_are_valid_settings() -> None:
    from judgelab.config import load_settings

    settings = load_settings(ROOT / "reference/params.yaml")
    shipped = yaml.safe_load((ROOT / "reference/params.yaml").read_text())
    for stage in DVC_STAGES:
        for key in stage.params:
            value: Any = shipped
            for part in key.split("."):
                assert part in value, f"reference/params.yaml lacks {key} ({stage.name})"
                value = value[part]
    limit = settings.tasks.humaneval.limit
    assert (limit == "all" or limit >= 30) and len(settings.probes.tasks) >= 10


def test_each_stage_names_the_models_it_calls() -> None:
    """The models a stage needs served: training's are its judges' (execution calls none)."""
    from judgelab.config import load_settings

    settings = load_settings(ROOT / "params.yaml")
    assert settings.train.rewards == ["execution", "ruler-qwen-1.5b"]
    training = next(s for s in STAGES if s.name == "training")
    assert training.models(settings) == ["qwen-1.5b"]
    assert "qwen-1.5b" in PIPELINE.models(settings)


def test_the_models_a_stage_calls_follow_its_settings() -> None:
    """One answer per stage (`Settings.models_called`), in the order of first use."""
    from judgelab.config import load_settings
    from judgelab.errors import ConfigError

    settings = load_settings(ROOT / "params.yaml")
    judges = ["qwen-1.5b", "qwen-0.5b", "smollm2-135m", "gemma-270m"]
    assert settings.models_called("scores") == judges
    assert settings.models_called("analysis") == []
    assert settings.models_called("pipeline") == ["qwen-0.5b", "qwen-1.5b", "smollm2-135m",
                                                  "gemma-270m"]  # fmt: skip
    probes = settings.probes.model_copy(update={"judges": ["ruler-gemma-270m"], "policies": []})
    changed = settings.model_copy(update={"probes": probes})
    # the judge first, then every registry model as a self-preference writer
    assert changed.models_called("probes") == ["gemma-270m", "qwen-0.5b", "qwen-1.5b",
                                               "smollm2-135m"]  # fmt: skip
    no_self = probes.model_copy(update={"self_preference": False})
    assert settings.model_copy(update={"probes": no_self}).models_called("probes") == ["gemma-270m"]
    imported = settings.rollouts.model_copy(update={"candidates": "inputs/c.jsonl"})
    assert settings.model_copy(update={"rollouts": imported}).models_called("rollouts") == []
    with pytest.raises(ConfigError, match="unknown stage 'train'"):
        settings.models_called("train")


# ------------------------------------------- the params a stage's code reads, derived


def _section_paths() -> dict[str, str]:
    """Settings section class name -> its dotted params.yaml path (`CodeIOSettings` ->
    `tasks.codeio`)."""
    from pydantic import BaseModel

    paths: dict[str, str] = {}

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            for t in (field.annotation, *typing.get_args(field.annotation)):
                if isinstance(t, type) and issubclass(t, BaseModel):
                    paths.setdefault(t.__name__, prefix + name)
                    walk(t, f"{prefix}{name}.")

    walk(Settings, "")
    return paths


# Sections a stage's code names without reading a value that changes its output.
SPEED_ONLY = {"server", "runner", "cache"}  # how fast, never what (Stage.params)
NAMED_NOT_READ = {
    ("scores", "rollouts"): "rollouts.generate's candidates_by_task reads the rollouts table",
    ("analysis", "rollouts"): "the same table reader; the analysis reads tables, not settings",
    ("analysis", "scores"): "scoring.failures reads the scores table (the budget is the "
    "scores stage's; the report is given it by the analysis settings)",
    ("analysis", "train.loss"): "judgelab.advantage takes rewards and a convention, no settings",
    ("probes", "train.loss"): "the same advantages",
    ("probes", "analysis.power"): "analysis.power names the section; the probes read none of it",
    ("training", "tasks.humaneval"): "humaneval_by_ids builds the ids asked for, whatever "
    "tasks.humaneval selects",
    ("probes", "tasks.humaneval"): "the same",
}


def _read_sections(stage: str) -> set[str]:
    """The sections whose settings class a module of the stage's flow names (outside the
    config itself, where every class is named)."""
    from tests.unit.test_architecture import FLOWS, closure, graph, module_files

    modules = module_files()
    paths = _section_paths()
    texts = [
        modules[m].read_text()
        for m in closure(FLOWS[stage], graph(), modules)
        if not m.startswith("judgelab.config")
    ]
    return {path for cls, path in paths.items() if any(re.search(rf"\b{cls}\b", t) for t in texts)}


def _undeclared(stage: Stage, read: set[str]) -> list[str]:
    def covered(p: str) -> bool:
        return any(q == p or q.startswith(p + ".") or p.startswith(q + ".") for q in stage.params)

    return sorted(
        p for p in read - SPEED_ONLY if not covered(p) and (stage.name, p) not in NAMED_NOT_READ
    )


@pytest.mark.parametrize("stage", DVC_STAGES, ids=lambda s: s.name)
def test_a_stage_declares_every_section_its_code_reads(stage: Stage) -> None:
    """Derived from the code: each settings section a module of the stage's flow names must
    be among the stage's params (itself, a key under it or the section above it), so that
    `dvc repro` reruns the stage when it changes."""
    assert _undeclared(stage, _read_sections(stage.name)) == []


def test_the_derivation_finds_the_held_out_tasks_of_training() -> None:
    """The control: training builds held-out tasks through their sources; without the task
    sources' params it would not rerun when they change."""
    training = next(s for s in DVC_STAGES if s.name == "training")
    read = _read_sections("training")
    assert {"tasks.codeio", "train"} <= read
    blind = dataclasses.replace(
        training, params=tuple(p for p in training.params if not p.startswith("tasks."))
    )
    assert "tasks.codeio" in _undeclared(blind, read)


@pytest.mark.parametrize("stage", DVC_STAGES, ids=lambda s: s.name)
def test_a_stage_that_reads_your_task_files_depends_on_inputs(stage: Stage) -> None:
    if any(p in ("tasks", "tasks.files") for p in stage.params):
        assert "inputs" in entries(dvc_stage(stage), "deps"), stage.name
