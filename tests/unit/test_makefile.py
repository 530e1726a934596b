"""The Makefile's .PHONY targets are its real ones, and `make help` names every one of them."""

from __future__ import annotations

import re
from pathlib import Path

MAKEFILE = (Path(__file__).resolve().parents[2] / "Makefile").read_text()


def phony() -> set[str]:
    line = re.search(r"^\.PHONY:(.*)$", MAKEFILE, re.M)
    assert line, "the Makefile declares its phony targets"
    return set(line.group(1).split())


def rules() -> set[str]:
    """Targets that have a rule: `name:` at the start of a line (not `:=`, not a variable)."""
    return set(re.findall(r"^([a-z][a-z0-9-]*):(?!=)", MAKEFILE, re.M))


def helped() -> set[str]:
    body = MAKEFILE.split("\nhelp:", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r'@echo "make ([a-z][a-z0-9-]*) ', body))


def test_every_phony_target_has_a_rule() -> None:
    assert phony() - rules() == set()


def test_make_help_names_every_target_but_itself() -> None:
    assert helped() == phony() - {"help"}


def test_the_parsers_see_the_targets() -> None:
    assert {"install", "run", "test", "lint"} <= phony() & rules()
