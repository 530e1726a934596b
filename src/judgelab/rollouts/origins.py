"""Where a candidate comes from, read from its writer (the rollouts table's `policy`).

``contrast``: a known-truth contrast group's member (`judgelab.rollouts.contrast`): the task's
reference solution, a mutant of it named by its kind, or a non-answer. ``natural``: anything
else, a policy's sample or an imported candidate.
"""

from __future__ import annotations

from judgelab.config import MUTANT_KINDS

REFERENCE = "reference"
NON_ANSWER_WRITER = "non_answer"
CONTRAST_WRITERS = frozenset({REFERENCE, NON_ANSWER_WRITER, *MUTANT_KINDS})
ORIGINS = ("natural", "contrast")


def origin(writer: str) -> str:
    return "contrast" if writer in CONTRAST_WRITERS else "natural"
