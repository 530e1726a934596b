"""A report section written once, as blocks of the report model (`report.model`), and
rendered to both formats: the `Section` a section module hands `report.audit`."""

from __future__ import annotations

from collections.abc import Sequence

from judgelab.report.as_html import html_lines
from judgelab.report.as_markdown import blocks_markdown
from judgelab.report.model import Block, Heading, Section


def section(title: str, blocks: Sequence[Block], ran: bool = True, sep: str = "") -> Section:
    """The section headed `title` (level 2), its blocks after the heading; its HTML lines
    joined by `sep`; `ran`: False for a section that says its stage has not run."""
    body = [Heading(title), *blocks]
    return Section(title, sep.join(html_lines(body)), blocks_markdown(body), ran=ran)
