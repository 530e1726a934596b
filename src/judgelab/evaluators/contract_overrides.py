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
    "HumanEval/97": Override(
        "all(x % 10 == abs(x) % 10 for x in (a, b))",
        "the unit digit of a negative number is ambiguous (the reference's -13 % 10 is 7, the "
        "docstring's reading 3); the public negatives end in 5, where both agree",
    ),
}
