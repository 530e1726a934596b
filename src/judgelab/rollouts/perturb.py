"""Pure generators for the bias probes: code mutants, surface perturbations, permutations.

Nothing here runs code. Mutants are *candidates* for broken code: `judgelab.probes.design` keeps
only those the task's tests prove broken (through the execution evaluator's sandbox).

Mutants (AST-based, inside the entry-point function; each yields one variant per site, in
source order, so the first one the tests reject is the one kept):
- ``operator_flip``: a comparison flipped (< to >=, <= to >, == to !=, in to not in, and back),
  else an arithmetic operator swapped (+ and -, * and //, / and *).
- ``off_by_one``: an integer constant n becomes n + 1.
- ``dropped_return``: a ``return X`` becomes the bare expression ``X`` (computed, not returned).
- ``wrong_constant``: a number n becomes -n - 7, a string gets "x" appended, a bool is negated.
- ``swapped_arguments``: the first two positional arguments of a call swap, else the operands of
  a non-commutative binary operator (-, /, //, %, **).
A *non-answer* (`NON_ANSWER`) is a polite refusal with no code.

Surface perturbations keep the code's behaviour (the design step re-runs the tests to prove the
verdict unchanged): ``comments`` pads the code with comment lines, ``docstring`` with a
module docstring, ``opener`` prefixes the answer with a reasoning opener, ``claims`` adds
confident claims in the prose and as a code comment.

`permutations(k, p, seed)`: the identity, then the reversal, then seeded random distinct orders.
"""

from __future__ import annotations

import ast
import copy
import random
from collections.abc import Callable, Iterator

from judgelab.answer import parse_answer
from judgelab.config.probes import MUTANT_KINDS, PERTURBATION_KINDS

NON_ANSWER = "I'm sorry, but I can't help with writing this function."

_CMP_FLIP: dict[type, type] = {
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.LtE: ast.Gt,
    ast.Gt: ast.LtE,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
_BIN_FLIP: dict[type, type] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.FloorDiv,
    ast.FloorDiv: ast.Mult,
    ast.Div: ast.Mult,
}
_NON_COMMUTATIVE = (ast.Sub, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)

OPENER = "Let me think step by step.\nThought process: I read the request carefully, "
OPENER += "considered the edge cases and derived the solution below.\n\n"
CLAIM = "This solution is fully tested, verified against every edge case and production-ready."
COMMENT_PAD = [
    "# Implementation notes:",
    "# - the inputs are validated implicitly by the operations below",
    "# - the algorithm is written for clarity first and performance second",
    "# - every branch below has been reviewed for correctness",
]
DOCSTRING_PAD = (
    '"""Solution module.\n\nThis module implements the requested function. It follows the '
    "specification in the task statement exactly, handles the edge cases described there and "
    'keeps the implementation simple and readable.\n"""\n'
)


def entry_function(tree: ast.Module, entry_point: str) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == entry_point:
            return node
    return None


def _sites(fn: ast.FunctionDef, kind: str) -> list[tuple[ast.AST, str]]:
    """(node, what) pairs that the mutation `kind` can change, in walk order."""
    body = fn.body
    if ast.get_docstring(fn, clean=False) is not None:
        body = body[1:]  # a docstring is not behaviour
    nodes = [n for stmt in body for n in ast.walk(stmt)]
    if kind == "operator_flip":
        cmp = [
            (n, "cmp") for n in nodes if isinstance(n, ast.Compare) and type(n.ops[0]) in _CMP_FLIP
        ]
        arith = [(n, "bin") for n in nodes if isinstance(n, ast.BinOp) and type(n.op) in _BIN_FLIP]
        aug = [
            (n, "bin") for n in nodes if isinstance(n, ast.AugAssign) and type(n.op) in _BIN_FLIP
        ]
        return cmp + arith + aug
    if kind == "off_by_one":
        return [(n, "int") for n in nodes if isinstance(n, ast.Constant) and type(n.value) is int]
    if kind == "dropped_return":
        return [(n, "ret") for n in nodes if isinstance(n, ast.Return) and n.value is not None]
    if kind == "wrong_constant":
        return [
            (n, "const")
            for n in nodes
            if isinstance(n, ast.Constant) and type(n.value) in (int, float, str, bool)
        ]
    if kind == "swapped_arguments":
        calls = [(n, "call") for n in nodes if isinstance(n, ast.Call) and len(n.args) >= 2]
        ops = [
            (n, "operands")
            for n in nodes
            if isinstance(n, ast.BinOp) and isinstance(n.op, _NON_COMMUTATIVE)
        ]
        return calls + ops
    raise ValueError(f"unknown mutant kind {kind!r}; valid: {list(MUTANT_KINDS)}")


def _apply(node: ast.AST, what: str) -> None:
    if what == "cmp":
        node.ops[0] = _CMP_FLIP[type(node.ops[0])]()  # type: ignore[attr-defined]
    elif what == "bin":
        node.op = _BIN_FLIP[type(node.op)]()  # type: ignore[attr-defined]
    elif what == "int":
        node.value = node.value + 1  # type: ignore[attr-defined]
    elif what == "const":
        v = node.value  # type: ignore[attr-defined]
        if isinstance(v, bool):
            node.value = not v  # type: ignore[attr-defined]
        elif isinstance(v, int | float):
            node.value = -v - 7  # type: ignore[attr-defined]
        else:
            node.value = v + "x"  # type: ignore[attr-defined]
    elif what == "call":
        args = node.args  # type: ignore[attr-defined]
        args[0], args[1] = args[1], args[0]
    elif what == "operands":
        node.left, node.right = node.right, node.left  # type: ignore[attr-defined]


class _DropReturn(ast.NodeTransformer):
    def __init__(self, target: int) -> None:
        self.target = target
        self.seen = 0

    def visit_Return(self, node: ast.Return) -> ast.AST:  # noqa: N802 (ast's naming)
        if node.value is None:
            return node
        self.seen += 1
        if self.seen - 1 == self.target:
            return ast.copy_location(ast.Expr(value=node.value), node)
        return node


def mutants(source: str, entry_point: str, kind: str) -> Iterator[str]:
    """Every single-site `kind` mutant of `entry_point` in `source`, as source text."""
    tree = ast.parse(source)
    fn = entry_function(tree, entry_point)
    if fn is None:
        raise ValueError(f"source does not define {entry_point!r} at top level")
    original = ast.unparse(tree)
    for i in range(len(_sites(fn, kind))):
        mutated = copy.deepcopy(tree)
        mfn = entry_function(mutated, entry_point)
        assert mfn is not None
        if kind == "dropped_return":
            _DropReturn(i).visit(mfn)
        else:
            node, what = _sites(mfn, kind)[i]
            _apply(node, what)
        text = ast.unparse(ast.fix_missing_locations(mutated))
        if text != original:
            yield text


def answer(request: str, code: str, prose: str = "") -> str:
    """An answer in the experiment's tag format (what the policy is asked to write)."""
    return (
        f"{prose}<request>{request}</request>\n<language>Python</language>\n<code>\n{code}\n</code>"
    )


def _replace_code(completion: str, transform: Callable[[str], str]) -> str | None:
    parsed = parse_answer(completion)
    if parsed.code is None:
        return None
    new = transform(parsed.code)
    if parsed.code_source in ("tag", "unclosed"):
        head, sep, tail = completion.partition("<code>")
        body_end = tail.find("</code>")
        rest = tail[body_end:] if body_end >= 0 else ""
        return f"{head}{sep}\n{new}\n{rest}"
    return completion.replace(parsed.code, new, 1)


def perturb(completion: str, kind: str) -> str | None:
    """The completion with one surface perturbation; None when it has no code to perturb."""
    if kind not in PERTURBATIONS:
        raise ValueError(f"unknown perturbation {kind!r}; valid: {list(PERTURBATION_KINDS)}")
    return PERTURBATIONS[kind](completion)


def _claims(completion: str) -> str | None:
    if parse_answer(completion).code is None:
        return None
    claimed = _replace_code(completion, lambda c: f"# {CLAIM}\n{c}")
    return None if claimed is None else f"{CLAIM}\n\n{claimed}"


# One implementation for each perturbation kind the config declares.
PERTURBATIONS: dict[str, Callable[[str], str | None]] = {
    "comments": lambda a: _replace_code(a, lambda c: "\n".join(COMMENT_PAD) + "\n" + c),
    "docstring": lambda a: _replace_code(a, lambda c: DOCSTRING_PAD + c),
    "opener": lambda a: None if parse_answer(a).code is None else OPENER + a,
    "claims": _claims,
}
if tuple(PERTURBATIONS) != PERTURBATION_KINDS:
    raise ImportError(
        f"perturbations implemented here {list(PERTURBATIONS)} are not those judgelab.config."
        f"probes declares {list(PERTURBATION_KINDS)}"
    )


def permutations(k: int, p: int, seed: int) -> list[list[int]]:
    """`p` distinct orders of range(k): identity, reversal, then seeded random ones."""
    orders: list[list[int]] = []
    candidates = [list(range(k)), list(reversed(range(k)))]
    rng = random.Random(seed)
    attempts = 0
    while len(orders) < p and attempts < 1000:
        if candidates:
            order = candidates.pop(0)
        else:
            order = list(range(k))
            rng.shuffle(order)
            attempts += 1
        if order not in orders:
            orders.append(order)
    return orders
