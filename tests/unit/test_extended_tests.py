"""Tests the candidate has not seen (evaluators/extended.py): the public inputs a task's
`check` names, the contracts its mutations keep, and extra inputs that are new, reproducible
and answered by the reference in the sandbox. Hand-made cases; the cost of strictness on the
reference audit is measured by reference/rescore_truth.py (docs/SECURITY.md)."""

from __future__ import annotations

from judgelab.evaluators.extended import Contract, extended_cases, extra_inputs, public_inputs
from judgelab.sandbox import Limits
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
