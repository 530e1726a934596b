"""The change budget, measured: adding an evaluator, a task source or an attack, as the guides
walk it (docs/ADDING_AN_EVALUATOR.md, docs/ADDING_A_TASK_SOURCE.md, docs/ADDING_AN_ATTACK.md),
touches its module and one registration (the files each guide's "Files touched" line names),
and no other. Each test adds a
throwaway one to a copy of the package, counts the files that differ from the checkout, and
runs the new one in a fresh interpreter on that copy: it must be usable from params.yaml's
settings with nothing else changed. (Its own test and the generated docs/CONFIG.md are the
other two files a real addition touches.)
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(SRC, tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "src"


def touched(copy: Path) -> list[str]:
    """The files of the copy that are new or differ from the checkout's, relative to src/."""
    out = []
    for path in sorted(copy.rglob("*.py")):
        original = SRC / path.relative_to(copy)
        if not original.exists() or not filecmp.cmp(path, original, shallow=False):
            out.append(str(path.relative_to(copy)))
    return out


def edit(copy: Path, name: str, anchor: str, text: str, before: bool = True) -> None:
    """Put `text` just before (or after) the one place `anchor` stands in src/`name`."""
    path = copy / name
    body = path.read_text()
    assert body.count(anchor) == 1, f"{name}: the guide's anchor {anchor!r} moved"
    path.write_text(body.replace(anchor, text + anchor if before else anchor + text))


def run(copy: Path, script: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def files_touched(guide: str, name: str = "") -> list[str]:
    """The src/ paths of the guide's "Files touched:" paragraph, the new module's `<kind>` or
    `<source>` read as `name`."""
    text = (ROOT / "docs" / guide).read_text()
    para = next(p for p in text.split("\n\n") if p.startswith("**Files touched"))
    paths = re.findall(r"`(src/[^`]+)`", re.sub("<kind>|<source>", name, para))
    return sorted(p.removeprefix("src/") for p in paths)


def code_block(guide: str, first_line: str) -> str:
    """The guide's code block that starts with `first_line`."""
    text = (ROOT / "docs" / guide).read_text()
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"{guide}: no code block starting {first_line!r}")


def test_an_evaluator_is_its_module_and_its_registration(copy: Path) -> None:
    guide = "ADDING_AN_EVALUATOR.md"
    module = code_block(guide, "# src/judgelab/evaluators/length.py")
    (copy / "judgelab/evaluators/length.py").write_text(module)
    settings = code_block(guide, "class LengthSettings(EvaluatorSettings):").split("\n\n\n")[0]
    edit(copy, "judgelab/config/evaluators.py", "\n\n# kind -> its settings model",
         "\n\n\n" + settings.rstrip())  # fmt: skip
    edit(copy, "judgelab/config/evaluators.py", '    "rubric": RubricSettings,\n',
         '    "length": LengthSettings,\n', before=False)  # fmt: skip
    assert touched(copy) == files_touched(guide, "length") == [
        "judgelab/config/evaluators.py", "judgelab/evaluators/length.py",
    ]  # fmt: skip
    out = run(
        copy,
        """
        from judgelab.config import parse_settings
        from judgelab.evaluators.registry import build_evaluator
        from judgelab.verdicts import Candidate, Task
        settings = parse_settings({"models": {}, "rollouts": {"candidates": "c.jsonl"},
            "tasks": {"autorl": {"enabled": False}},
            "scores": {"evaluators": [{"name": "short", "kind": "length", "max_chars": 10}]}})
        [spec] = settings.scores.evaluators
        judge = build_evaluator(spec, {})
        task = Task("t", "files", "def f():\\n")
        cands = [Candidate("t", f"c{i}", i, "x" * n) for i, n in enumerate((5, 15, 40))]
        print(judge.protocol, [v.score for v in judge.score_group(task, cands)])
    """,
    )
    assert out.split() == ["rule", "[1.0,", "0.5,", "0.0]"]


def test_a_task_source_is_its_module_and_its_registration(copy: Path) -> None:
    guide = "ADDING_A_TASK_SOURCE.md"
    module = code_block(guide, "# src/judgelab/tasks/tiny.py")
    (copy / "judgelab/tasks/tiny.py").write_text(module)
    section = code_block(guide, "class TinySettings(Section):").split("\n\n\n")[0]
    edit(copy, "judgelab/config/tasks.py", "\n\n\nclass TasksSettings(Section):",
         "\n\n\n" + section.rstrip())  # fmt: skip
    edit(copy, "judgelab/config/tasks.py", "    autorl: AutoRLSettings = AutoRLSettings()\n",
         "    tiny: TinySettings = TinySettings()\n", before=False)  # fmt: skip
    entry = code_block(guide, '    "tiny": SourceLoader(').rstrip() + "\n"
    edit(copy, "judgelab/config/tasks.py", '    "autorl": SourceLoader(', entry)
    assert touched(copy) == files_touched(guide, "tiny") == [
        "judgelab/config/tasks.py", "judgelab/tasks/tiny.py",
    ]  # fmt: skip
    out = run(
        copy,
        """
        from pathlib import Path
        from judgelab.config import TasksSettings
        from judgelab.schemas import TasksSchema, validate
        from judgelab.tasks import tasks_frame
        from judgelab.tasks.registry import load_sources
        settings = TasksSettings.model_validate(
            {"humaneval": {"enabled": False}, "codeio": {"enabled": False}, "tiny": {"count": 2}})
        tasks, reports = load_sources(settings, Path("."))
        validate(tasks_frame(tasks), TasksSchema, "tasks")
        print(sorted({t.source for t in tasks}), len(tasks))
    """,
    )
    assert out.split() == ["['tiny']", "2"]


def test_an_attack_is_its_implementation_and_its_name(copy: Path) -> None:
    guide = "ADDING_AN_ATTACK.md"
    edit(copy, "judgelab/config/probes.py", '"grader_docstring"', ', "grader_footer"',
         before=False)  # fmt: skip
    implementation = code_block(guide, '    "grader_footer":').rstrip() + "\n"
    edit(copy, "judgelab/probes/attacks.py", '    "grader_comment": lambda', implementation)
    assert touched(copy) == files_touched(guide) == [
        "judgelab/config/probes.py", "judgelab/probes/attacks.py",
    ]  # fmt: skip
    out = run(
        copy,
        """
        from judgelab.config import ProbesSettings
        from judgelab.probes.attacks import ATTACKS, attack
        ProbesSettings(attacks=["grader_footer"])
        text = attack("<code>\\ndef f():\\n    return 1\\n</code>", "grader_footer", "f")
        print(ATTACKS["grader_footer"].family, "GRADER" in text)
    """,
    )
    assert out.split() == ["grader_instruction", "True"]
