"""Per-task corrections to the inferred input contracts (evaluators/contracts.py).

Inference reads only what the public inputs share; where a task's contract is narrower than
that (its docstring says more than its tests show), the task is named here with a condition
every extra input must meet, as EvalPlus writes a contract by hand, and one line of why.
`where` is a Python expression over the entry point's parameters by name (and `args`, the
tuple), evaluated with a few plain built-ins (len, all, sum, ...); an input it rejects or
cannot evaluate is not asked. The table is the repository's own text: no candidate's value
reaches it. Changing an entry changes the extended tests' cache key (its text is in it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Override:
    where: str | None  # a condition on the arguments; None: nothing beyond inference
    reason: str  # one line: what inference gets wrong for this task


OVERRIDES: dict[str, Override] = {
    "HumanEval/39": Override(
        "n <= 11",
        "the reference's cost: it tests prime_fib(12) = 99194853094755497 by trial division, past "
        "any time limit, and a reference out of time ends the extra inputs",
    ),
    "HumanEval/44": Override(
        "2 <= base < 10",
        "a base is 2 to 9 (the docstring: 'base numbers are less than 10'); at base 1 the "
        "reference never ends",
    ),
    "HumanEval/59": Override(
        "n > 1 and any(n % d == 0 for d in range(2, n))",
        "the docstring's 'assume n > 1 and is not a prime': inference keeps n positive only",
    ),
    "HumanEval/94": Override(
        "any(x > 1 and all(x % d for d in range(2, int(x ** 0.5) + 1)) for x in lst)",
        "the list must hold a prime (every public one does): with none, the reference, whose "
        "isPrime(1) is True, answers 1",
    ),
    "HumanEval/97": Override(
        "all(x % 10 == abs(x) % 10 for x in (a, b))",
        "the unit digit of a negative number is ambiguous (the reference's -13 % 10 is 7, the "
        "docstring's reading 3); the public negatives end in 5, where both agree",
    ),
    "HumanEval/122": Override(
        "all(not -100 < x <= -10 for x in arr[:k])",
        "a negative number of two digits is ambiguous (the reference counts its sign: "
        "len(str(-21)) is 3; the docstring's 'at most two digits' does not); the public "
        "negatives have one digit, where both agree",
    ),
    "HumanEval/140": Override(
        "not text.endswith('  ') or text.endswith('   ')",
        "the reference turns a trailing run of two spaces into one underscore (the docstring: "
        "two, as it does inside the text); inputs that end in exactly two spaces are left out",
    ),
}
