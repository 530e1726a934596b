"""The slim install stays slim: an endpoint audit imports none of the extras' modules (torch,
transformers, peft, gguf, llama_cpp, prefect_dask, and the pipeline's Prefect, DVC and MLflow
outside the flows), the API, the gate and the guard import nothing heavy until a call needs
it, and a command that needs an extra this environment lacks stops with an error naming it
(`judgelab.extras`).

The import guard is the cheap half of tests/integration/test_slim_install.py (which installs
the package into a venv without the extras and audits a loopback judge with it): here every
module of judgelab and its CLI is imported in a fresh interpreter in which the extras' modules
cannot be loaded, and every attempt to load one is recorded with where it came from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from judgelab import extras
from judgelab.errors import EXIT_BAD_INPUT, MissingExtraError, exit_code
from judgelab.extras import EXTRAS, require

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
# The one module that is the embedded extra: llama.cpp's server program, run as a child process.
EMBEDDED_PROGRAM = "judgelab.models.llama_server"

# A module of an extra is found (so `importlib.util.find_spec` probes, as polars and litellm
# make, see it) but loading it fails as if it were not installed; each attempt is recorded.
GUARD = """
import importlib, json, sys, traceback
from importlib.machinery import ModuleSpec

HEAVY = set(json.loads(sys.argv[1]))
attempts = []

class Absent:
    def create_module(self, spec):
        stack = [f"{f.filename}:{f.lineno}" for f in traceback.extract_stack()]
        ours = [s for s in stack if "importlib" not in s]
        attempts.append({"module": spec.name, "from": ours[-4:]})
        raise ModuleNotFoundError(f"No module named {spec.name!r}", name=spec.name)

    def exec_module(self, module):
        pass

class Guard:
    def find_spec(self, name, path=None, target=None):
        return ModuleSpec(name, Absent()) if name.split(".")[0] in HEAVY else None

sys.meta_path.insert(0, Guard())
failed = {}
for name in json.loads(sys.argv[2]):
    try:
        importlib.import_module(name)
    except ImportError as err:
        failed[name] = str(err)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY)
print(json.dumps({"attempts": attempts, "failed": failed, "loaded": loaded}))
"""


def audit_modules() -> list[str]:
    """Every module of judgelab (its flows included) and judgelab_cli but the embedded program
    and `python -m judgelab_cli` (importing it runs the command line)."""
    names = sorted(
        ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        for package in ("judgelab", "judgelab_cli")
        for path in (SRC / package).rglob("*.py")
    )
    return [n for n in names if n not in (EMBEDDED_PROGRAM, "judgelab_cli.__main__")]


def guarded(heavy: list[str], names: list[str]) -> dict:
    """The guard's result: `names` imported in a fresh interpreter where `heavy` are absent."""
    out = subprocess.run(
        [sys.executable, "-c", GUARD, json.dumps(heavy), json.dumps(names)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def flow_modules(names: list[str]) -> list[str]:
    """The pipeline extra's own modules: the Prefect flows (their stage table and paths,
    which the CLI reads for its commands and --help, are core)."""
    core = ("judgelab.flows", "judgelab.flows.paths", "judgelab.flows.stages")
    return [n for n in names if n.startswith("judgelab.flows") and n not in core]


def test_no_audit_module_imports_an_extra() -> None:
    """The core (everything but the flows) imports no extra's module, the pipeline's Prefect,
    DVC and MLflow included; the flows import none but the pipeline's."""
    names = audit_modules()
    assert {"judgelab_cli.main", "judgelab.flows.scores", "judgelab.evaluators.ruler"} <= set(names)
    heavy = sorted({m for modules in EXTRAS.values() for m in modules})
    assert {"torch", "transformers", "peft", "gguf", "llama_cpp", "prefect", "mlflow"} <= set(heavy)
    flows = flow_modules(names)
    assert "judgelab.flows.scores" in flows and "judgelab.flows.stages" not in flows
    core = guarded(heavy, [n for n in names if n not in flows])
    assert core["attempts"] == [], core["attempts"]
    assert core["failed"] == {} and core["loaded"] == []
    but_pipeline = [m for m in heavy if m not in EXTRAS["pipeline"]]
    result = guarded(but_pipeline, flows)
    assert result["attempts"] == [], result["attempts"]
    assert result["failed"] == {} and result["loaded"] == []


# What a trainer's process pays to reach the API, the gate and the guard: none of these load
# until a call needs them (judgelab.api's imports are inside its functions).
NOT_AT_IMPORT = ("prefect", "dvc", "mlflow", "pandera", "scipy", "matplotlib", "polars",
                 "openai", "litellm", "art", "torch", "sklearn")  # fmt: skip
ENTRY = (
    "import json, sys\n"
    "import judgelab\n"
    "judgelab.audit, judgelab.make_settings, judgelab.AuditResult\n"
    "import judgelab.api, judgelab.guard, judgelab.analysis.gate\n"
    "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
)


def test_the_api_gate_and_guard_import_nothing_heavy() -> None:
    out = subprocess.run([sys.executable, "-c", ENTRY], capture_output=True, text=True,
                         timeout=120, check=True)  # fmt: skip
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "judgelab" in loaded and "pydantic" in loaded  # the probe sees what it imported
    assert sorted(loaded & set(NOT_AT_IMPORT)) == []


def test_the_guard_sees_an_import_of_an_extra(tmp_path: Path) -> None:
    (tmp_path / "eager.py").write_text("import torch\n")
    (tmp_path / "probing.py").write_text("import importlib.util as u\nu.find_spec('torch')\n")
    script = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n" + GUARD
    out = subprocess.run(
        [sys.executable, "-c", script, json.dumps(["torch"]), json.dumps(["probing", "eager"])],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert [a["module"] for a in result["attempts"]] == ["torch"]
    assert any("eager.py" in frame for frame in result["attempts"][0]["from"])
    assert list(result["failed"]) == ["eager"]


@pytest.fixture()
def lacking(monkeypatch: pytest.MonkeyPatch):
    """Make an extra's modules include one this environment does not have."""

    def lack(extra: str) -> None:
        monkeypatch.setitem(EXTRAS, extra, (*EXTRAS[extra], "judgelab_not_installed"))

    return lack


def test_a_missing_extra_is_named_with_its_install_command(lacking) -> None:
    require("train", "training")  # the full environment has it
    lacking("train")
    assert extras.missing("train") == ["judgelab_not_installed"]
    with pytest.raises(MissingExtraError) as err:
        require("train", "the training stage")
    message = str(err.value)
    assert "the training stage needs the 'train' extra" in message
    assert "judgelab_not_installed" in message and "pip install 'judgelab[train]'" in message
    assert exit_code(err.value) == EXIT_BAD_INPUT
    with pytest.raises(ValueError, match="unknown extra 'gpu'; choose from"):
        extras.missing("gpu")


def test_the_pipeline_commands_ask_for_their_extra(lacking) -> None:
    """A stage's command (a Prefect flow) in a core install: exit 2, the extra to install and
    the one-process command to run instead, before anything runs."""
    from typer.testing import CliRunner

    from judgelab_cli import app

    lacking("pipeline")
    result = CliRunner().invoke(app, ["scores", "-p", str(ROOT / "params.yaml")])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert "judgelab scores (a Prefect flow) needs the 'pipeline' extra" in result.output
    assert "pip install 'judgelab[pipeline]'; or, in one process: judgelab audit" in result.output


def test_training_embedded_models_and_dask_ask_for_their_extra(lacking) -> None:
    from judgelab.config import EmbeddedModel, RunnerSettings, load_settings
    from judgelab.doctor import check_llama_cpp
    from judgelab.flows.fanout import task_runner
    from judgelab.models.server import serve
    from judgelab.training.policy import resolve_device

    settings = load_settings(ROOT / "params.yaml")
    embedded = [n for n, m in settings.models.items() if isinstance(m, EmbeddedModel)]

    for extra in EXTRAS:
        lacking(extra)
    with pytest.raises(MissingExtraError, match=r"judgelab\[train\]"):
        resolve_device("auto")  # before torch is imported
    with pytest.raises(MissingExtraError, match=r"runner.kind: dask needs .*judgelab\[dask\]"):
        task_runner(RunnerSettings(kind="dask"))
    server = serve(settings, embedded[:1])
    with pytest.raises(MissingExtraError, match=r"embedded models .*judgelab\[embedded\]"):
        server.__enter__()  # before the server's lock or the zoo's files
    check = check_llama_cpp()
    assert check.status == "fail" and "pip install 'judgelab[embedded]'" in check.detail
