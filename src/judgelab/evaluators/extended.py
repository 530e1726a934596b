"""Tests the candidate has not seen: extra inputs for a task, derived from its own tests.

HumanEval's tests are public and thin (EvalPlus found wrong code that passes them), and a
candidate that hard-codes their answers passes them: no harness tells, only inputs it has not
seen. This module makes them as EvalPlus does, by type-aware mutation of the tests' own
inputs, and computes their expected outputs with the task's reference solution:

- `public_inputs(test)`: the arguments of every `candidate(...)` call in the task's `check`
  whose arguments are all literals (HumanEval/0's seven, for instance); calls built at run
  time (loops, random inputs) are left to the original tests.
- The input contract (evaluators/contracts.py): what every public input shares, per argument
  (type, sign, non-emptiness, a string's alphabet and shape, a list's order and items) and
  between arguments (equal lengths, `k <= len(arr)`, order), narrowed per task by hand where
  inference falls short (evaluators/contract_overrides.py), as EvalPlus writes its contracts.
- `extra_inputs(test, count, seed, override, names)`: up to `count` new argument tuples, one
  argument mutated from a public input each (a number stepped; a list's items mutated, added
  or removed; a string's characters, or its words when the public strings have spaces), kept
  only if they meet the whole contract, deduplicated against the public inputs and each other,
  reproducible from `seed`.
- `extended_cases(task, ...)`: those inputs with the reference's outputs, computed in the
  sandbox (`run_tests` with `CallTests`), so the expected values never meet the candidate;
  inputs the reference rejects (it raises, or its value is not plain data) are dropped and
  counted, and a reference that runs out of time ends the list there. Cached per process by
  what changes them (`GENERATOR`, the task's prompt, reference and tests, count, seed, its
  override's condition).
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import string
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from judgelab.evaluators.contract_overrides import OVERRIDES, Override
from judgelab.evaluators.contracts import Contract, Contracts
from judgelab.sandbox import CallTests, Limits, run_tests
from judgelab.verdicts import Task

GENERATOR = "extended-2"  # change it when what the generation makes changes
MAX_TRIES = 40  # mutations tried per input wanted
_LITERAL_TYPES = (int, float, str, bool, list, tuple, dict, type(None))


@dataclass(frozen=True)
class Extended:
    """A task's extra tests: (arguments, expected output) pairs, and what was left out."""

    cases: list[tuple[list[Any], Any]]
    public: int  # the public inputs they were derived from
    dropped: int  # inputs the reference rejected


def public_inputs(test: str) -> list[tuple[Any, ...]]:
    """The literal argument tuples of the `candidate(...)` calls in `test`, in order, once each."""
    try:
        tree = ast.parse(test)
    except (SyntaxError, ValueError, RecursionError):
        return []
    found: list[tuple[Any, ...]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id != "candidate" or node.keywords:
            continue
        try:
            args = tuple(ast.literal_eval(arg) for arg in node.args)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            continue
        if args not in found:
            found.append(args)
    return found


def extra_inputs(
    test: str,
    count: int,
    seed: int,
    override: Override | None = None,
    names: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """Up to `count` new argument tuples mutated from `test`'s public inputs, each within the
    contracts inferred from them (and `override`'s, over the parameters `names`)."""
    public = [p for p in public_inputs(test) if all(_literal(a) for a in p)]
    arity = {len(p) for p in public}
    if not public or len(arity) != 1:
        return []
    contracts = Contracts.infer(public, list(names), override)
    rng = random.Random(seed)
    seen = {repr(p) for p in public}
    made: list[tuple[Any, ...]] = []
    for _ in range(count * MAX_TRIES):
        if len(made) >= count:
            break
        base = list(rng.choice(public))
        which = rng.randrange(len(base))
        contract = contracts.arguments[which]
        if contract is None or type(base[which]) is not contract.kind:
            continue
        kin = [p[which] for p in public if type(p[which]) is contract.kind]
        value = _mutate(base[which], contract, rng, public_values=kin)
        if value is None:
            continue
        base[which] = value
        key = repr(tuple(base))
        if key not in seen and contracts.admits(tuple(base)):
            seen.add(key)
            made.append(tuple(base))
    return made


_cache: dict[str, Extended] = {}
_cache_lock = threading.Lock()


def parameters(prompt: str, entry_point: str) -> list[str]:
    """The positional parameter names of `entry_point` in `prompt` (empty if not found)."""
    try:
        tree = ast.parse(prompt)
    except (SyntaxError, ValueError, RecursionError):
        return []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == entry_point:
            return [a.arg for a in node.args.posonlyargs + node.args.args]
    return []


def extended_cases(task: Task, count: int, seed: int, limits: Limits) -> Extended:
    """`task`'s extra tests, with the reference's outputs (see the module docstring)."""
    assert task.test is not None and task.entry_point is not None
    override = OVERRIDES.get(task.task_id)
    key = hashlib.sha256(json.dumps(
        [GENERATOR, task.prompt, task.canonical_solution, task.test, count, seed,
         override.where if override else None]
    ).encode()).hexdigest()  # fmt: skip
    with _cache_lock:
        if key in _cache:
            return _cache[key]
    names = parameters(task.prompt, task.entry_point)
    inputs = (extra_inputs(task.test, count, seed, override, names)
              if task.canonical_solution else [])  # fmt: skip
    reference = task.prompt + (task.canonical_solution or "")
    cases: list[tuple[list[Any], Any]] = []
    dropped = 0
    pending = [list(args) for args in inputs]
    while pending:
        run = run_tests(reference, CallTests(task.entry_point, pending), limits)
        values = run.values or []
        cases += list(zip(pending[: len(values)], values, strict=True))
        if run.outcome == "passed":
            break
        if run.outcome in ("failed", "forged") and run.failed_case is not None:
            dropped += 1  # the reference rejects this input: no test can ask for it
            pending = pending[run.failed_case + 1 :]
            continue
        dropped += len(pending) - len(values)  # a limit: the rest is not worth its time
        break
    found = Extended(cases=cases, public=len(public_inputs(task.test)), dropped=dropped)
    with _cache_lock:
        _cache[key] = found
    return found


# ------------------------------------------------------------------ mutation


def _mutate(value: Any, contract: Contract, rng: random.Random, public_values: list[Any]) -> Any:
    kind = contract.kind
    if kind is bool:
        return not value
    if kind is int:
        return _number(int(value), contract, rng, [int(v) for v in public_values])
    if kind is float:
        return float(_number(float(value), contract, rng, [float(v) for v in public_values]))
    if kind is str:
        words = [w for v in public_values if isinstance(v, str) for w in v.split(" ")]
        if " " in "".join(public_values) and rng.random() < 0.5:
            return _words(value, words, contract, rng)
        return _text(value, contract, rng)
    if kind in (list, tuple):
        return _sequence(value, contract, rng, public_values)
    return None


def _number(value: float, contract: Contract, rng: random.Random, seen: list[float]) -> Any:
    span = max(abs(v) for v in [*seen, 1])
    step = rng.choice([1, 2, 3, span, 0.5 * span]) if isinstance(value, float) else rng.choice(
        [1, 2, 3, int(span) or 1])  # fmt: skip
    out = rng.choice([value + step, value - step, value * 2, -value, rng.uniform(-span, span)])
    out = int(round(out)) if isinstance(value, int) else round(out, 3)
    if contract.sign == 1 and out <= 0:
        out = abs(out) or 1
    if contract.sign == 0 and out < 0:
        out = abs(out)
    return out


def _text(value: str, contract: Contract, rng: random.Random) -> str | None:
    alphabet = contract.alphabet or string.ascii_lowercase
    chars = list(value)
    action = rng.choice(["insert", "delete", "replace", "swap", "repeat"])
    if action == "insert" or not chars:
        chars.insert(rng.randint(0, len(chars)), rng.choice(alphabet))
    elif action == "delete" and (len(chars) > 1 or not contract.non_empty):
        del chars[rng.randrange(len(chars))]
    elif action == "replace":
        chars[rng.randrange(len(chars))] = rng.choice(alphabet)
    elif action == "swap" and len(chars) > 1:
        i, j = rng.sample(range(len(chars)), 2)
        chars[i], chars[j] = chars[j], chars[i]
    else:
        chars = chars + chars[: rng.randint(1, len(chars))]
    return "".join(chars)


def _words(value: str, pool: list[str], contract: Contract, rng: random.Random) -> str:
    """A word-level mutation of a space-separated string, with words the public strings use
    ("three one five" becomes "three five five one", never "thrfe")."""
    words = value.split(" ") if value else []
    action = rng.choice(["insert", "delete", "replace", "swap"])
    if action == "insert" or not words:
        words.insert(rng.randint(0, len(words)), rng.choice(pool))
    elif action == "delete" and (len(words) > 1 or not contract.non_empty):
        del words[rng.randrange(len(words))]
    elif action == "replace" or len(words) < 2:
        words[rng.randrange(len(words))] = rng.choice(pool)
    else:
        i, j = rng.sample(range(len(words)), 2)
        words[i], words[j] = words[j], words[i]
    return " ".join(words)


def _sequence(value: Any, contract: Contract, rng: random.Random, seen: list[Any]) -> Any:
    items = list(value)
    pool = [i for v in seen for i in v]
    action = rng.choice(["mutate", "mutate", "remove", "add", "duplicate"])
    if contract.kind is tuple and action in ("remove", "add", "duplicate"):
        action = "mutate"  # a tuple's length is usually its meaning (a pair, a range)
    if action == "mutate" and items and contract.item is not None:
        i = rng.randrange(len(items))
        new = _mutate(items[i], contract.item, rng, pool)
        if new is None:
            return None
        items[i] = new
    elif action == "remove" and (len(items) > 1 or not contract.non_empty) and items:
        del items[rng.randrange(len(items))]
    elif action == "add" and pool:
        items.insert(rng.randint(0, len(items)), rng.choice(pool))
    elif action == "duplicate" and items:
        items.insert(rng.randint(0, len(items)), rng.choice(items))
    else:
        return None
    if contract.ordered:
        try:
            items.sort()
        except TypeError:
            return None
    return tuple(items) if contract.kind is tuple else items


def _literal(value: Any) -> bool:
    """Plain data of the kinds the mutations know, all the way down."""
    if isinstance(value, list | tuple):
        return all(_literal(v) for v in value)
    if isinstance(value, dict):
        return False  # a dict's keys are its meaning: left to the original tests
    return isinstance(value, _LITERAL_TYPES)
