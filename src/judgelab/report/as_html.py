"""The HTML renderer of the report model (`report.model`): a self-contained report.html and
the HTML of a section. The only module of the report layer that writes HTML
(tests/unit/test_report_model.py).

Every piece of text is HTML-escaped here (`report.format.escape`), so data (evaluator and task
names, judge explanations, completions, reasons) cannot inject markup. The page needs no
network: inline CSS, PNGs embedded as base64 data URIs, no scripts."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from judgelab.report.format import NO_CI_MARK, escape, no_ci_footnote
from judgelab.report.model import (
    Block,
    BulletList,
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

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;
max-width:1100px;padding:0 1em;color:#1d1d1f;line-height:1.45}
h1,h2,h3{line-height:1.2}
table{border-collapse:collapse;font-size:.85em;margin:1em 0}
th,td{border:1px solid #d0d0d0;padding:.3em .5em;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}
th{background:#f2f4f7}
tr:nth-child(even) td{background:#fafafa}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:.6em;overflow-x:auto;font-size:.8em;
white-space:pre-wrap}
img{max-width:100%;border:1px solid #eee;margin:.4em 0}
.note{color:#555;font-size:.9em}
.bad{color:#b00020;font-weight:600}
"""


BAD = ' class="bad"'


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def html_table(
    table_id: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[str]],
    min_ci_groups: Any,
    spaced: bool = False,
) -> list[str]:
    """A table; with an id each header cell on a line of its own (`spaced`: but the first,
    on the opening line), without one the header on one line. A cell marked † brings the
    footnote."""
    head = [f"<th>{escape(c)}</th>" for c in columns]
    if table_id is None:
        h = ["<table><thead><tr>" + "".join(head) + "</tr></thead><tbody>"]
    else:
        h = [f'<table id="{table_id}"><thead><tr>', *head, "</tr></thead><tbody>"]
        if spaced and head:
            h[:2] = [h[0] + h[1]]
    h += ["<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows]
    h.append("</tbody></table>")
    if any(NO_CI_MARK in c for row in rows for c in row):
        h.append(f'<p class="note">{escape(no_ci_footnote(min_ci_groups))}</p>')
    return h


def _runs(runs: Sequence[Run]) -> str:
    return "".join(
        escape(r) if isinstance(r, str)
        else escape(r.text) if isinstance(r, Strong)
        else f"<code>{escape(r.text)}</code>"
        for r in runs
    )  # fmt: skip


def _figure(label: str, path: Path) -> str:
    return (
        f'<figure><img alt="{escape(label)}" src="{data_uri(path)}">'
        f"<figcaption>{escape(label)}</figcaption></figure>"
    )


def block_lines(block: Block) -> list[str]:
    """One block's lines of HTML."""
    match block:
        case Raw():
            return list(block.html)
        case Heading():
            return [f"<h{block.level}>{escape(block.text)}</h{block.level}>"]
        case Paragraph():
            cls = ' class="note"' if block.note else ""
            return [f"<p{cls}>{_runs(block.runs)}</p>"]
        case Notes():
            return [f'<p class="note">{escape(line)}</p>' for line in block.lines]
        case Table():
            return html_table(
                block.table_id, block.columns, block.rows, block.min_ci_groups, block.spaced
            )
        case Embedded():
            return [f'<figure><img alt="{escape(block.label)}" src="{block.uri}"></figure>']
        case BulletList():
            items = [
                f"<li{BAD if bad else ''}>{escape(t) if isinstance(t, str) else _runs(t)}</li>"
                for t, bad in block.items
            ]
            if block.one_line:
                return ["<ul>" + "".join(items) + "</ul>"]
            if block.title is None:
                return ["<ul>", *items, "</ul>"]
            return [f"<h3>{escape(block.title)}</h3><ul>", *items, "</ul>"]
        case Figures():
            return [_figure(i.label, i.path) for i in block.images]
        case Listing():
            return [f"<p><b>{escape(block.caption)}</b></p><pre>{escape(block.text)}</pre>"]


def html_lines(blocks: Sequence[Block]) -> list[str]:
    """The blocks' lines; a block with `glue` continues the line before it."""
    out: list[str] = []
    for block in blocks:
        lines = block_lines(block)
        if getattr(block, "glue", False) and out and lines:
            out[-1] += lines[0]
            lines = lines[1:]
        out += lines
    return out


def render(doc: Document) -> str:
    """A whole page: inline CSS, the title as its one <h1>, then the blocks."""
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{escape(doc.title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>{escape(doc.title)}</h1>",
    ]
    return "\n".join([*head, *html_lines(doc.blocks), "</body></html>"]) + "\n"
