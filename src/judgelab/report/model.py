"""The report model: a report is a list of blocks (headings, paragraphs, tables, bullet lists,
images, listings), built once from the metrics and rendered to Markdown by
`report.markdown` and to HTML by `report.html`. A section is written once, as blocks; no
module but the HTML renderer writes HTML (tests/unit/test_report_model.py).

Text in a block is plain text, never markup: each renderer escapes it for its format. Inline
code inside a paragraph is a `Code` run, bold a `Strong` run. `Raw` carries a `Section`
already rendered to both formats (`report.sections`), its lines verbatim.

Layout: in Markdown every block ends with a blank line; in HTML each block is one or more
lines, and a block with `glue` continues the line before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Code:
    """An inline code run of a paragraph: `text` in Markdown, <code> in HTML."""

    text: str


@dataclass(frozen=True)
class Strong:
    """A strong run of a paragraph: **text** in Markdown; in HTML the text alone (the
    report's HTML has never set it bold)."""

    text: str


Run = str | Code | Strong


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2
    glue: bool = False


@dataclass(frozen=True)
class Paragraph:
    """Runs of text; `note`: a side remark (HTML class "note")."""

    runs: tuple[Run, ...]
    note: bool = False

    @classmethod
    def of(cls, text: str, note: bool = False) -> Paragraph:
        return cls((text,), note)


@dataclass(frozen=True)
class Notes:
    """Sentences that read as one paragraph in Markdown and one note each in HTML."""

    lines: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A table of text cells. `table_id`: its HTML id (None: no id, and the header on one
    line). `min_ci_groups`: stated in the footnote a cell marked † calls for
    (`report.format.no_ci_footnote`)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    table_id: str | None = None
    min_ci_groups: Any = None
    glue: bool = False
    # the bias table's layout: Markdown rule `| --- |`, HTML first header cell on the
    # table's opening line
    spaced: bool = False


@dataclass(frozen=True)
class BulletList:
    """A list, under a level-3 `title` if any: `items` as (text, bad news?), a text plain
    or runs (`Run`); bad news is marked in HTML."""

    title: str | None
    items: tuple[tuple[str | tuple[Run, ...], bool], ...]
    one_line: bool = False  # HTML: the whole list on one line
    glue: bool = False

    @classmethod
    def of(cls, items: Sequence[str]) -> BulletList:
        return cls(None, tuple((x, False) for x in items))


@dataclass(frozen=True)
class Image:
    """A PNG: `link` from the Markdown file, `path` to embed in the HTML."""

    label: str
    path: Path
    link: str


@dataclass(frozen=True)
class Embedded:
    """A PNG drawn in memory, as a data URI: in the HTML alone, without a caption."""

    label: str
    uri: str


@dataclass(frozen=True)
class Figures:
    """Images one after another, no text between them."""

    images: tuple[Image, ...]


@dataclass(frozen=True)
class Listing:
    """Verbatim text (code, a model's reply) under a caption: fenced in Markdown so that it
    cannot break out, <pre> in HTML."""

    caption: str
    text: str


@dataclass(frozen=True)
class Raw:
    """Lines already rendered (a `Section`'s, `report.sections`), as they go out."""

    markdown: tuple[str, ...]
    html: tuple[str, ...]


Block = Heading | Paragraph | Notes | Table | BulletList | Figures | Embedded | Listing | Raw


@dataclass(frozen=True)
class Section:
    """A section rendered ahead of the report, in both formats (`report.sections.section`);
    `ran`: False for a section that says its stage has not run."""

    title: str
    html: str
    markdown: str
    ran: bool


@dataclass(frozen=True)
class Document:
    title: str
    blocks: tuple[Block, ...] = field(default=())


def table(
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    table_id: str | None = None,
    glue: bool = False,
    spaced: bool = False,
) -> Table:
    """A table without CIs (no footnote on the minimum)."""
    return Table(tuple(columns), tuple(tuple(r) for r in rows), table_id, None, glue, spaced)


def ci_table(
    columns: Sequence[str], rows: Sequence[Sequence[str]], table_id: str, min_ci_groups: Any
) -> Table:
    """A table whose CIs follow `analysis.min_ci_groups` (its footnote states it)."""
    return Table(tuple(columns), tuple(tuple(r) for r in rows), table_id, min_ci_groups)
