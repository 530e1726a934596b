"""Input contracts of a task's unseen tests: what an extra input must keep to be a fair question.

EvalPlus writes each HumanEval problem's input contract by hand (`assert` lines before the
reference). We have no such contracts, so we infer them from the task's public inputs (the
literal `candidate(...)` calls of its `check`), keep an extra input only if it meets every
one, and correct what inference gets wrong per task (`contract_overrides.OVERRIDES`).

Inferred, each only when every public input has it (so inference can only narrow the inputs,
never widen them beyond what the public tests show):

- per argument (`Contract`): its type (the type of more than half the public values, when
  they mix); the sign of a number (> 0, >= 0); a string, list or
  tuple that is never empty; a string's alphabet (the characters the public strings use); a
  sorted list; the same, recursively, for a list's items; and a string's shape:
  - `template`: every public string is one sentence with only its numbers changing
    ("5 apples and 6 oranges"): digits may change, nothing else (two distinct strings at least);
  - `spaced`: no leading or trailing space and no run of two (words apart by one space);
  - `balanced` / `groups_balanced`: the brackets of each string (of each space-separated
    group) pair up, when every public string with a bracket is so;
  - `letters`: every space-separated word is one character ("a b b a").
- between arguments (`Relation`): two sized arguments of equal length (`string_xor`'s
  strings, `compare`'s lists); an integer at most another argument's length (`k <= len(arr)`);
  a number at most another.

`Contracts.infer(public, names, override)` gathers them; `Contracts.admits(args)` is the test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import permutations
from typing import Any

from judgelab.evaluators.contract_overrides import Override

_BRACKETS = {")": "(", "]": "[", "}": "{", ">": "<"}
_DIGITS = re.compile(r"\d+")
# what an override's `where` may call: plain functions of plain data, nothing that reaches out
_SAFE_BUILTINS = {f.__name__: f for f in (abs, all, any, int, isinstance, len, list, max, min,
                                          range, set, sorted, str, sum)}  # fmt: skip


@dataclass(frozen=True)
class Shape:
    """What every public string of one argument shares beyond its alphabet."""

    template: str | None  # the string with each digit run as "0", when all share it
    spaced: bool
    balanced: bool
    groups_balanced: bool
    letters: bool = False  # every space-separated word is one character ("a b b a")

    @classmethod
    def of(cls, strings: list[str]) -> Shape:
        templates = {_DIGITS.sub("0", s) for s in strings}
        template = templates.pop() if len(templates) == 1 and len(set(strings)) > 1 else None
        spaced = all(_spaced(s) for s in strings)
        bracketed = [s for s in strings if any(c in s for c in "()[]{}<>")]
        balanced = bool(bracketed) and all(_balanced(s) for s in bracketed)
        groups = bool(bracketed) and all(_balanced(g) for s in bracketed for g in s.split())
        words = [w for s in strings for w in s.split()]
        letters = any(" " in s.strip() for s in strings) and all(len(w) == 1 for w in words)
        return cls(template, spaced, balanced, groups, letters)

    def admits(self, value: str) -> bool:
        return (
            (self.template is None or _DIGITS.sub("0", value) == self.template)
            and (not self.spaced or _spaced(value))
            and (not self.balanced or _balanced(value))
            and (not self.groups_balanced or all(_balanced(g) for g in value.split()))
            and (not self.letters or all(len(w) == 1 for w in value.split()))
        )


@dataclass(frozen=True)
class Contract:
    """What every public value of one argument shares (see the module docstring)."""

    kind: type
    sign: int  # 1: all > 0, 0: all >= 0, -1: any
    non_empty: bool
    alphabet: str  # strings (and strings inside lists): the characters seen
    ordered: bool  # lists: all sorted
    item: Contract | None  # lists and tuples: their items' contract, when one holds
    shape: Shape | None = None  # strings

    @classmethod
    def of(cls, values: list[Any]) -> Contract | None:
        kinds = {type(v) for v in values}
        if len(kinds) != 1 or not values:
            return None
        kind = kinds.pop()
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        sign = 1 if numbers and all(v > 0 for v in numbers) else (
            0 if numbers and all(v >= 0 for v in numbers) else -1)  # fmt: skip
        sized = [v for v in values if isinstance(v, str | list | tuple | dict)]
        non_empty = bool(sized) and all(len(v) > 0 for v in sized)
        chars = "".join(_strings(values))
        items = [i for v in values if isinstance(v, list | tuple) for i in v]
        ordered = kind is list and all(_sorted(v) for v in values)
        item = cls.of(items) if items else None
        shape = Shape.of(values) if kind is str else None
        return cls(kind, sign, non_empty, "".join(sorted(set(chars))), ordered, item, shape)

    def admits(self, value: Any) -> bool:
        """Whether `value` keeps this contract (all of it, down its items)."""
        if type(value) is not self.kind:
            return False
        if isinstance(value, int | float) and not isinstance(value, bool):
            return self.sign < 0 or value > 0 or (self.sign == 0 and value == 0)
        if isinstance(value, str | list | tuple) and self.non_empty and not value:
            return False
        if isinstance(value, str):
            alphabet_ok = not self.alphabet or set(value) <= set(self.alphabet)
            return alphabet_ok and (self.shape is None or self.shape.admits(value))
        if isinstance(value, list | tuple):
            if self.ordered and not _sorted(value):
                return False
            return self.item is None or all(self.item.admits(v) for v in value)
        return True


@dataclass(frozen=True)
class Relation:
    """One relation between two arguments that every public input keeps."""

    kind: str  # "same_length": len(a) == len(b); "at_most_length": a <= len(b); "at_most": a <= b
    first: int
    second: int

    def holds(self, args: tuple[Any, ...]) -> bool:
        a, b = args[self.first], args[self.second]
        if self.kind == "same_length":
            return _sized(a) and _sized(b) and len(a) == len(b)
        if self.kind == "at_most_length":
            return _integer(a) and _sized(b) and a <= len(b)
        return _number(a) and _number(b) and a <= b

    @classmethod
    def all_of(cls, public: list[tuple[Any, ...]]) -> list[Relation]:
        """Every relation that every public input keeps."""
        arity = len(public[0])
        found = [cls(kind, i, j) for i, j in permutations(range(arity), 2)
                 for kind in ("same_length", "at_most_length", "at_most")]  # fmt: skip
        found = [r for r in found if r.kind != "same_length" or r.first < r.second]
        return [r for r in found if all(r.holds(p) for p in public)]


@dataclass(frozen=True)
class Contracts:
    """A task's input contract: per argument, between arguments, and its override."""

    arguments: list[Contract | None]
    relations: list[Relation]
    names: list[str]  # the entry point's parameters, for an override's `where`
    override: Override | None = None

    @classmethod
    def infer(
        cls, public: list[tuple[Any, ...]], names: list[str], override: Override | None = None
    ) -> Contracts:
        arity = len(public[0])
        arguments = [Contract.of(_majority([p[i] for p in public])) for i in range(arity)]
        return cls(arguments, Relation.all_of(public), names, override)

    def admits(self, args: tuple[Any, ...]) -> bool:
        """Whether `args` keeps every contract: each argument's, each relation, the override."""
        if any(c is not None and not c.admits(a) for c, a in zip(self.arguments, args,
                                                                   strict=True)):  # fmt: skip
            return False
        if not all(r.holds(args) for r in self.relations):
            return False
        if self.override is None or self.override.where is None:
            return True
        # `where` is this repository's own text (contract_overrides.py), `args` our own
        # literals: no candidate's value ever reaches this eval.
        # the arguments are globals, so that a generator inside the condition sees them too
        scope = dict(zip(self.names, args, strict=False)) | {"args": args}
        try:
            return bool(eval(self.override.where, {**scope, "__builtins__": _SAFE_BUILTINS}))  # noqa: S307
        except Exception:  # an input the condition cannot read is outside it
            return False


def _majority(values: list[Any]) -> list[Any]:
    """The values of the type more than half of them have (all, when they share one): an
    argument whose public values mix types (`hex_key`'s strings and one `[]`) is held to its
    main one; with no such type, all (and `Contract.of` finds no contract)."""
    kinds = [type(v) for v in values]
    main = max(set(kinds), key=kinds.count, default=None)
    if main is None or kinds.count(main) * 2 <= len(kinds):
        return values
    return [v for v in values if type(v) is main]


def _spaced(value: str) -> bool:
    return value == value.strip() and "  " not in value


def _balanced(value: str) -> bool:
    stack: list[str] = []
    for c in value:
        if c in "([{<":
            stack.append(c)
        elif c in _BRACKETS and (not stack or stack.pop() != _BRACKETS[c]):
            return False
    return not stack


def _strings(values: list[Any]) -> list[str]:
    out: list[str] = []
    for v in values:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list | tuple):
            out += _strings(list(v))
    return out


def _sorted(value: Any) -> bool:
    try:
        return list(value) == sorted(value)
    except TypeError:
        return False


def _sized(value: Any) -> bool:
    return isinstance(value, str | list | tuple)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
