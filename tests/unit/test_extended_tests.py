"""Tests the candidate has not seen (evaluators/extended.py): the public inputs a task's
`check` names, the contracts its mutations keep, and extra inputs that are new, reproducible
and answered by the reference in the sandbox. Hand-made cases; the cost of strictness on the
reference audit is measured by reference/rescore_truth.py (docs/SECURITY.md)."""

from __future__ import annotations

import pytest

from judgelab.config import HumanEvalSettings
from judgelab.evaluators.contract_overrides import OVERRIDES, Override
from judgelab.evaluators.contracts import Contract, Contracts, Relation, Shape
from judgelab.evaluators.extended import (
    extended_cases,
    extra_inputs,
    parameters,
    public_inputs,
)
from judgelab.sandbox import Limits
from judgelab.tasks.humaneval import load_humaneval
from judgelab.verdicts import Task

XOR_TEST = """
def check(candidate):
    assert candidate('111000', '101010') == '010010'
    assert candidate('1', '1') == '0'
    assert candidate('0101', '0000') == '0101'
    for x in range(3):
        assert candidate(str(x), str(x)) == '0'
"""
SORTED_TEST = """
def check(candidate):
    assert candidate([1, 2, 3], 2) == 1
    assert candidate([0, 5, 9, 12], 9) == 2
    assert candidate([4], 4) == 0
"""


def test_public_inputs_are_the_literal_calls_once_each() -> None:
    assert public_inputs(XOR_TEST) == [("111000", "101010"), ("1", "1"), ("0101", "0000")]
    assert public_inputs("def check(c):\n    assert c(1) == 1\n") == []  # not `candidate`
    assert public_inputs("def check(candidate):\n    assert (\n") == []


def test_a_contract_is_what_every_public_value_shares() -> None:
    strings = Contract.of(["111000", "1", "0101"])
    assert strings is not None and strings.alphabet == "01" and strings.non_empty
    lists = Contract.of([[1, 2, 3], [0, 5, 9, 12], [4]])
    assert lists is not None and lists.ordered and lists.item is not None
    assert lists.item.sign == 0  # 0 is among the items: never negative, may be 0
    assert Contract.of([1, "a"]) is None  # no one type: left alone


def test_extra_inputs_keep_the_contracts_and_are_new_and_reproducible() -> None:
    made = extra_inputs(XOR_TEST, 25, seed=3)
    assert len(made) == 25 and made == extra_inputs(XOR_TEST, 25, seed=3)
    assert made != extra_inputs(XOR_TEST, 25, seed=4)
    public = set(public_inputs(XOR_TEST))
    assert not public & set(made) and len(set(made)) == len(made)
    assert all(set(a + b) <= {"0", "1"} and a and b for a, b in made)
    for values, target in extra_inputs(SORTED_TEST, 25, seed=0):
        assert values == sorted(values) and values and all(v >= 0 for v in values)
        assert isinstance(target, int) and target >= 0


def test_expected_outputs_come_from_the_reference_and_rejected_inputs_are_dropped() -> None:
    test = "def check(candidate):\n    assert candidate(4) == 2\n    assert candidate(9) == 3\n"
    task = Task(
        "t",
        "files",
        "def root(n):\n",
        "root",
        test,
        canonical_solution=(
            "    if n in (5, 6, 7, 8):\n        raise ValueError('no')\n    return int(n ** 0.5)\n"
        ),
    )
    extra = extended_cases(task, 12, 0, Limits(timeout_s=10))
    assert extra.public == 2 and extra.cases
    assert all(expected == int(args[0] ** 0.5) for args, expected in extra.cases)
    assert all(args[0] not in (5, 6, 7, 8) for args, _ in extra.cases)
    assert len(extra.cases) + extra.dropped == len(extra_inputs(test, 12, 0))


def test_relations_are_those_every_public_input_keeps() -> None:
    public = [("111000", "101010", 3), ("1", "1", 1), ("0101", "0000", 2)]
    found = Relation.all_of(public)
    assert Relation("same_length", 0, 1) in found
    assert Relation("at_most_length", 2, 0) in found and Relation("at_most_length", 2, 1) in found
    # broken once, gone: 3 > len("1") would be needed for the reverse, and "1" is no number
    assert Relation("at_most_length", 2, 0).holds(("ab", "cd", 2))
    assert not Relation("at_most_length", 2, 0).holds(("ab", "cd", 3))
    assert not Relation("same_length", 0, 1).holds(("1", "11", 1))
    assert Relation("at_most", 0, 1) in Relation.all_of([(1, 2), (3, 3)])
    assert Relation("at_most", 0, 1) not in Relation.all_of([(1, 2), (4, 3)])


def test_a_string_shape_is_what_every_public_string_shares() -> None:
    sentence = Shape.of(["5 apples and 6 oranges", "0 apples and 100 oranges"])
    assert sentence.template == "0 apples and 0 oranges"
    assert sentence.admits("12 apples and 3 oranges")
    assert not sentence.admits("5 apples and 6 orangesa")
    assert not sentence.admits("5 apples 6 oranges")
    groups = Shape.of(["(()()) ((())) ()", "() (())"])
    assert groups.balanced and groups.groups_balanced and groups.spaced
    assert not groups.admits("(()( )))") and not groups.admits("(() ") and not groups.admits(")(")
    assert groups.admits("(()) ()")
    whole = Shape.of(["( ) (( ))", "()"])  # balanced as a whole, not group by group
    assert whole.balanced and not whole.groups_balanced and whole.admits("(( ) )")
    free = Shape.of(["(()", "()"])  # an unbalanced public string: no bracket contract
    assert not free.balanced and free.admits("))")
    letters = Shape.of(["a b b a", "r t g", ""])
    assert letters.letters and letters.admits("a b") and not letters.admits("a bb")
    assert not letters.admits("a b ") and not letters.admits("a  b")  # single spaces, no edge
    assert Shape.of(["x"]).template is None  # one string: no template to generalise from


def test_contracts_admit_only_inputs_within_every_part() -> None:
    public = [([1, 2, 3], 2), ([4, 5], 1)]
    contracts = Contracts.infer(public, ["arr", "k"])
    assert contracts.admits(([7, 8, 9], 3))
    assert not contracts.admits(([7, 8], 3))  # k > len(arr)
    assert not contracts.admits(([7, 8], 0))  # k was always positive
    assert not contracts.admits(([8, 7], 1))  # arr was always sorted
    narrowed = Contracts.infer(public, ["arr", "k"], Override("k % 2 == 1 and arr", "why"))
    assert narrowed.admits(([4, 5], 1)) and not narrowed.admits(([4, 5], 2))
    broken = Contracts.infer(public, ["arr", "k"], Override("k.nope", "why"))
    assert not broken.admits(([4, 5], 1))  # a condition that cannot be read rejects
    sneaky = Contracts.infer(public, ["arr", "k"], Override("open('/etc/passwd')", "why"))
    assert not sneaky.admits(([4, 5], 1))  # only the plain built-ins are there


def test_extra_inputs_keep_relations_between_arguments() -> None:
    for a, b in extra_inputs(XOR_TEST, 25, seed=1):
        assert len(a) == len(b)
    test = (
        "def check(candidate):\n"
        "    assert candidate([1, -2, 3, 4], 3) == 2\n"
        "    assert candidate([5, 6], 1) == 5\n"
        "    assert candidate([9], 1) == 9\n"
    )
    made = extra_inputs(test, 30, seed=0)
    assert made and all(1 <= k <= len(arr) for arr, k in made)


def test_every_override_admits_its_task_s_public_inputs_and_says_why() -> None:
    """An override narrows the unseen inputs; the public ones are within any contract."""
    tasks = {t.task_id: t for t in load_humaneval(HumanEvalSettings(ids=sorted(OVERRIDES)))}
    for task_id, override in OVERRIDES.items():
        task = tasks[task_id]
        assert task.test is not None and task.entry_point is not None
        assert override.reason and len(override.reason) < 300
        names = parameters(task.prompt, task.entry_point)
        public = public_inputs(task.test)
        contracts = Contracts.infer(public, names, override)
        assert all(contracts.admits(p) for p in public), task_id


@pytest.mark.parametrize("task_id", ["HumanEval/97"])
def test_an_override_narrows_what_inference_allows(task_id: str) -> None:
    (task,) = load_humaneval(HumanEvalSettings(ids=[task_id]))
    assert task.test is not None and task.entry_point is not None
    names = parameters(task.prompt, task.entry_point)
    assert names == ["a", "b"]
    loose = extra_inputs(task.test, 30, 0, None, names)
    strict = extra_inputs(task.test, 30, 0, OVERRIDES[task_id], names)
    assert any(b % 10 != abs(b) % 10 for _, b in loose)  # inference alone lets -13 in
    assert strict and all(x % 10 == abs(x) % 10 for args in strict for x in args)


def test_words_are_mutated_as_words_and_mixed_types_keep_the_main_one() -> None:
    words = (
        "def check(candidate):\n"
        "    assert candidate('three one five') == 'one three five'\n"
        "    assert candidate('five zero four seven nine eight') == 'x'\n"
        "    assert candidate('three') == 'three'\n"
    )
    vocabulary = {"three", "one", "five", "zero", "four", "seven", "nine", "eight"}
    made = extra_inputs(words, 40, seed=0)
    whole = [s for (s,) in made if set(s.split()) <= vocabulary]
    assert len(whole) >= len(made) // 3  # about half the mutations keep whole words
    assert any(len(s.split()) > 1 and s not in {p for (p,) in public_inputs(words)}
               for s in whole)  # fmt: skip
    mixed = (
        "def check(candidate):\n"
        "    assert candidate('AB') == 1\n"
        "    assert candidate('1077E') == 2\n"
        "    assert candidate([]) == 0\n"
    )
    contract = Contracts.infer(public_inputs(mixed), ["num"]).arguments[0]
    assert contract is not None and contract.kind is str  # [] is the minority
    made = extra_inputs(mixed, 20, seed=0)
    assert made and all(isinstance(s, str) and set(s) <= set("AB1077E") for (s,) in made)
    assert Contracts.infer([(1,), ("a",)], ["x"]).arguments[0] is None  # no majority


def test_the_settings_dump_leaves_out_only_the_pre_extended_values() -> None:
    """Run ids hash the dump: an audit asking for the original tests keeps its ids; the
    default (extended, 200 inputs) dumps what it is."""
    from judgelab.config.evaluators import LEGACY_TESTS, ExecutionSettings

    default = ExecutionSettings(name="execution").model_dump(mode="json")
    assert default["tests"] == "extended" and default["extended_inputs"] == 200
    assert "extended_seed" not in default
    original = ExecutionSettings(name="execution", **LEGACY_TESTS).model_dump(mode="json")
    assert not set(LEGACY_TESTS) & set(original)
    assert ExecutionSettings.model_validate(default) == ExecutionSettings(name="execution")
