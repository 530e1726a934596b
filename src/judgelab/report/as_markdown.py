"""The Markdown renderer of the report model (`report.model`): report.md and the Markdown of
a section. Every block ends with a blank line; table cells and headings have `|` escaped and
newlines folded (`md_cell`); verbatim text is fenced by a fence longer than any backtick run
in it (`report.format.fence`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from judgelab.report.format import NO_CI_MARK, fence, no_ci_footnote
from judgelab.report.model import (
    Block,
    BulletList,
    Code,
    Document,
    Embedded,
    Figures,
    Heading,
    Listing,
    Notes,
    Paragraph,
    Raw,
    Run,
    Strong,
    Table,
)


def md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def md_table(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    min_ci_groups: Any,
    spaced: bool = False,
) -> list[str]:
    rule = " --- |" if spaced else "---|"
    out = ["| " + " | ".join(columns) + " |", "|" + rule * len(columns)]
    out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    if any(NO_CI_MARK in c for row in rows for c in row):
        out += ["", no_ci_footnote(min_ci_groups)]
    return out


def md_runs(runs: Sequence[Run]) -> str:
    """Runs as Markdown: code in backticks, strong in `**`, text as it is."""
    return "".join(
        f"`{r.text}`" if isinstance(r, Code) else f"**{r.text}**" if isinstance(r, Strong) else r
        for r in runs
    )


def block_lines(block: Block) -> list[str]:
    """One block's lines, its closing blank line included."""
    match block:
        case Raw():
            return list(block.markdown)
        case Embedded():
            return []
        case Heading():
            out = [f"{'#' * block.level} {md_cell(block.text)}"]
        case Paragraph():
            out = [md_runs(block.runs)]
        case Notes():
            out = [" ".join(block.lines)]
        case Table():
            out = md_table(block.columns, block.rows, block.min_ci_groups, block.spaced)
        case BulletList():
            title = [] if block.title is None else [f"### {md_cell(block.title)}"]
            items = (md_cell(t) if isinstance(t, str) else md_runs(t) for t, _ in block.items)
            out = [*title, *(f"- {t}" for t in items)]
        case Figures():
            out = [f"![{md_cell(i.label)}]({i.link})" for i in block.images]
        case Listing():
            out = [block.caption, "", fence(block.text)]
    return [*out, ""]


def lines(blocks: Sequence[Block]) -> list[str]:
    """The blocks' Markdown lines."""
    return [line for b in blocks for line in block_lines(b)]


def blocks_markdown(blocks: Sequence[Block]) -> str:
    """The blocks as Markdown text, ending in one newline."""
    return "\n".join(lines(blocks)).rstrip() + "\n"


def render(doc: Document) -> str:
    """A whole report: its title as the one level-1 heading, then its blocks."""
    return blocks_markdown([Heading(doc.title, level=1), *doc.blocks])
