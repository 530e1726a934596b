"""Probe generators: AST mutants, surface perturbations, permutations, probe groups.

Mutants and perturbations are checked with the real execution evaluator (sandbox): every
mutant kept is broken by the tests, every perturbation keeps the test verdict."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from judgelab.answer import parse_answer
from judgelab.config import MUTANT_KINDS, PERTURBATION_KINDS, HumanEvalSettings, parse_settings
from judgelab.errors import ConfigError
from judgelab.probes.design import calibration_group, views_for
from judgelab.rollouts.contrast import canonical_source, execution_check
from judgelab.rollouts.perturb import (
    NON_ANSWER,
    answer,
    mutants,
    permutations,
    perturb,
)
from judgelab.tasks.humaneval import load_humaneval

ROOT = Path(__file__).resolve().parents[2]
SOURCE = '''

def f(xs, n):
    """Sum of the first n items above 2, minus one."""
    total = 0
    for i in range(n):
        if xs[i] > 2:
            total += xs[i]
    return max(total, 0) - 1
'''

EXPECTED_SITE = {
    "operator_flip": "xs[i] <= 2",
    "off_by_one": "total = 1",
    "dropped_return": "\n    max(total, 0) - 1",
    "wrong_constant": "total = -7",
    "swapped_arguments": "max(0, total)",
}


def test_a_perturbation_the_config_declares_without_an_implementation_fails_the_import() -> None:
    """The config's names are the one list: the generators' module refuses to import while a
    declared perturbation has no implementation (the control: a name added to the config)."""
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    script = (
        "import judgelab.config.probes as p\n"
        "p.PERTURBATION_KINDS = (*p.PERTURBATION_KINDS, 'emoji')\n"
        "import judgelab.rollouts.perturb\n"
    )
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "'emoji'" in out.stderr, out.stderr[-500:]


@pytest.mark.parametrize("kind", MUTANT_KINDS)
def test_each_mutant_kind_changes_one_site_and_parses(kind: str) -> None:
    found = list(mutants(SOURCE, "f", kind))
    assert found, kind
    original = ast.unparse(ast.parse(SOURCE))
    for text in found:
        ast.parse(text)
        assert text != original
    assert EXPECTED_SITE[kind] in found[0]


def test_mutants_need_the_entry_point_and_a_known_kind() -> None:
    with pytest.raises(ValueError, match="does not define 'g'"):
        list(mutants(SOURCE, "g", "off_by_one"))
    with pytest.raises(ValueError, match="unknown mutant kind"):
        list(mutants(SOURCE, "f", "nope"))


def test_permutations_identity_then_reversal_then_distinct() -> None:
    orders = permutations(4, 5, seed=1)
    assert orders[0] == [0, 1, 2, 3]
    assert orders[1] == [3, 2, 1, 0]
    assert len({tuple(o) for o in orders}) == 5
    assert all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert permutations(4, 5, seed=1) == orders
    assert permutations(2, 5, seed=0) == [[0, 1], [1, 0]]  # only 2 exist


def test_surface_perturbations_keep_the_code_or_only_add_comments() -> None:
    completion = answer("req", "def f():\n    return 1")
    for kind in PERTURBATION_KINDS:
        text = perturb(completion, kind)
        assert text is not None and text != completion
        code = parse_answer(text).code
        assert ast.dump(ast.parse(code)).replace("Expr(value=Constant(", "") is not None
        body = [n for n in ast.parse(code).body if not isinstance(n, ast.Expr)]
        assert ast.unparse(body[0]) == "def f():\n    return 1"
    assert parse_answer(perturb(completion, "opener")).code == "def f():\n    return 1"
    assert perturb(NON_ANSWER, "comments") is None
    with pytest.raises(ValueError, match="unknown perturbation"):
        perturb(completion, "shouting")


TASK_IDS = ["HumanEval/0", "HumanEval/2", "HumanEval/4", "HumanEval/13", "HumanEval/35"]


@pytest.fixture(scope="module")
def check():  # type: ignore[no-untyped-def]
    return execution_check()


def test_calibration_groups_are_verified_by_the_sandbox(check) -> None:  # type: ignore[no-untyped-def]
    tasks = load_humaneval(HumanEvalSettings(ids=TASK_IDS))
    n_mutants = 0
    for task in tasks:
        group = calibration_group(task, list(MUTANT_KINDS), check, seed=0)
        kinds = [m.kind for m in group.members]
        assert kinds.count("canonical") == 1 and kinds.count("non_answer") == 1
        for m in group.members:
            # Independently re-run every member: the recorded verdict is the sandbox's.
            assert check(task, m.candidate.completion) is m.passed
            assert m.passed is (m.kind == "canonical")
        n_mutants += kinds.count("mutant")
        assert [m.candidate.sample_index for m in group.members] == list(range(len(kinds)))
        assert len({m.candidate.candidate_id for m in group.members}) == len(kinds)
        # Every perturbed copy keeps its original's verdict.
        for view in views_for(group, 3, list(PERTURBATION_KINDS), 2, check, seed=0):
            for i, copy in view.replaced.items():
                assert check(task, copy.candidate.completion) is group.members[i].passed
                assert copy.base_id == group.members[i].candidate.candidate_id
    assert n_mutants >= 2 * len(tasks)


def test_views_of_a_calibration_group(check) -> None:  # type: ignore[no-untyped-def]
    task = load_humaneval(HumanEvalSettings(ids=["HumanEval/0"]))[0]
    group = calibration_group(task, ["operator_flip", "dropped_return"], check, seed=0)
    views = views_for(group, 2, ["comments", "claims"], 2, check, seed=0)
    names = [(v.name, v.repeat) for v in views]
    assert names == [("perm:0", 0), ("perm:0", 1), ("perm:0", 2), ("pert:comments", 0),
                     ("pert:claims", 0), ("perm:1", 0)]  # fmt: skip
    assert views[1].order == views[2].order == views[0].order
    assert views[5].order == views[0].order[::-1]
    for v in views[3:5]:
        assert v.replaced and all(i % 2 == 0 for i in v.replaced)
    # a self-preference group: the same repeats (the noise floor covers every group the
    # position figures rest on), no perturbation
    from dataclasses import replace

    other = views_for(replace(group, probe="self_preference"), 2, ["comments"], 2, check, seed=0)
    assert [(v.name, v.repeat) for v in other] == [("perm:0", 0), ("perm:0", 1), ("perm:0", 2),
                                                   ("perm:1", 0)]  # fmt: skip


def test_canonical_source_needs_a_solution() -> None:
    task = load_humaneval(HumanEvalSettings(ids=["HumanEval/2"]))[0]
    assert "def truncate_number" in canonical_source(task)
    from dataclasses import replace

    with pytest.raises(ConfigError, match=r"probes\.tasks: HumanEval/2 has no canonical"):
        canonical_source(replace(task, canonical_solution=None))
    with pytest.raises(ConfigError, match="does not pass its tests"):
        calibration_group(task, ["off_by_one"], lambda t, c: False, seed=0)


def base_params() -> dict:
    return {
        "models": {"m": {"kind": "embedded", "zoo": "smollm2-135m-instruct", "family": "smollm"}},
        "tasks": {"autorl": {"model": "m"}},
        "rollouts": {"policy": "m"},
        "scores": {
            "evaluators": [
                {"name": "ruler-m", "kind": "ruler", "judge": "m"},
                {"name": "format", "kind": "format"},
                {"name": "execution", "kind": "execution"},
            ]
        },  # fmt: skip
    }


def test_probe_settings_reject_unknown_judges_and_policies() -> None:
    ok = parse_settings({**base_params(), "probes": {"judges": ["ruler-m"]}})
    assert ok.probes.judges == ["ruler-m"]
    with pytest.raises(ConfigError, match=r"probes\.judges\[0\].*'format'.*valid: \['ruler-m'\]"):
        parse_settings({**base_params(), "probes": {"judges": ["format"]}})
    with pytest.raises(ConfigError, match=r"probes\.policies\[0\]: unknown model 'x'"):
        parse_settings({**base_params(), "probes": {"policies": ["x"]}})
    with pytest.raises(ConfigError, match=r"probes\.mutants"):
        parse_settings({**base_params(), "probes": {"mutants": ["typo"]}})
    with pytest.raises(ConfigError, match=r"probes\.permuations: unknown key"):
        parse_settings({**base_params(), "probes": {"permuations": 2}})
