"""One report model (`report.model`), two renderers (`report.as_markdown`, `report.as_html`):
a section is written once, as blocks, and no module of the report layer but the HTML renderer
writes HTML. The two modules that still write their section per format are named here, and
the list only shrinks (each must still hold HTML to stay on it)."""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest

from judgelab.report import as_html, as_markdown
from judgelab.report.model import (
    Block,
    BulletList,
    Code,
    Document,
    Embedded,
    Figures,
    Heading,
    Image,
    Listing,
    Notes,
    Paragraph,
    Raw,
    Strong,
    ci_table,
    table,
)
from judgelab.report.sections import section

REPORT = Path(__file__).resolve().parents[2] / "src" / "judgelab" / "report"
TAG = re.compile(
    r"</?(?:h[1-6]|p|ul|ol|li|table|thead|tbody|tr|td|th|figure|figcaption|img|pre|code|b|em|"
    r"strong|div|span|html|head|body|style|title|meta|br|a)(?:[\s>]|$)",
    re.IGNORECASE,
)
RENDERER = "as_html.py"
# Sections still written per format by their own module: the bias panels (its table and
# in-memory figure have a layout of their own) and the training section (being rewritten).
STILL_PER_FORMAT: set[str] = set()


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def html_literals(source: str) -> list[str]:
    """`line: text` of each string literal (f-string parts included) holding an HTML tag;
    docstrings are prose and do not count."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [
        f"{node.lineno}: {node.value[:60]!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        and id(node) not in skip and TAG.search(node.value)
    ]  # fmt: skip


def test_only_the_html_renderer_writes_html() -> None:
    writers = {
        p.name: found
        for p in sorted(REPORT.glob("*.py"))
        if p.name != RENDERER and (found := html_literals(p.read_text(encoding="utf-8")))
    }
    assert set(writers) <= STILL_PER_FORMAT, {
        k: v for k, v in writers.items() if k not in STILL_PER_FORMAT
    }
    assert set(writers) == STILL_PER_FORMAT, "a section moved to the model: shrink the list"
    assert html_literals((REPORT / RENDERER).read_text(encoding="utf-8"))


def test_the_checker_sees_html_in_a_string_and_an_f_string() -> None:
    assert html_literals('x = "<p>"\n') == ["1: '<p>'"]
    assert len(html_literals('y = f"<td>{v}</td>"\n')) == 2
    assert html_literals('"""A <table> in a docstring."""\nz = "a < b > c"\n') == []


HOSTILE = "a|b <script>&\n`x`"


def every_block() -> list[Block]:
    png = Path(__file__)  # any bytes: the renderer embeds what the file holds
    return [
        Heading(HOSTILE),
        Paragraph(("run ", Code(HOSTILE)), note=True),
        Notes((HOSTILE, "two")),
        ci_table(("c|1", "<c2>"), [[HOSTILE, "0.5 (n = 2)†"]], "t", 5),
        BulletList("title <", ((HOSTILE, True), ("ok", False))),
        BulletList.of([HOSTILE]),
        Figures((Image(HOSTILE, png, "plots/x.png"),)),
        Embedded(HOSTILE, "data:image/png;base64,AAAA"),
        Listing("Code:", "```\n" + HOSTILE),
        Raw(("raw md",), ("<p>raw</p>",)),
    ]


def test_every_kind_of_block_renders_in_both_formats() -> None:
    kinds = set(typing.get_args(Block))
    assert {type(b) for b in every_block()} == kinds
    for block in every_block():
        assert isinstance(as_markdown.block_lines(block), list), block
        assert isinstance(as_html.block_lines(block), list), block


def test_html_escapes_every_piece_of_text() -> None:
    page = as_html.render(Document("t <x>", tuple(every_block()[:-1])))
    assert "<script>" not in page and "t &lt;x&gt;" in page
    assert page.count("&lt;script&gt;") == 10  # each block's copy of the hostile text
    assert '<li class="bad">' in page and "<li>ok</li>" in page
    assert '<p class="note">† Fewer task groups than the minimum (5)' in page


def test_markdown_fences_verbatim_text_and_escapes_cells() -> None:
    md = as_markdown.blocks_markdown(every_block())
    assert "| a\\|b <script>& `x` | 0.5 (n = 2)† |" in md
    assert "````\n```\na|b <script>&\n`x`\n````" in md  # a fence longer than the text's
    assert "run `a|b <script>&\n`x``" in md and "- a\\|b <script>& `x`" in md
    assert "![a\\|b <script>& `x`](plots/x.png)" in md
    assert md.endswith("raw md\n")


def test_strong_runs_every_paragraph_in_both_and_the_spaced_table() -> None:
    """The training and bias sections' layout: `**` in Markdown and plain text in HTML, every
    paragraph in both formats, a list on the table's closing line, the bias table's rule and
    header, and an in-memory PNG in the HTML alone."""
    blocks = [
        Paragraph(("a ", Strong("b<"), " c")),
        table(["f", "j<"], [["1", "2"]], "bias", spaced=True),
        Paragraph.of("in both"),
        BulletList(None, ((("x ", Strong("y")), False),), glue=True),
        Embedded("panels", "data:image/png;base64,AAAA"),
    ]
    assert as_html.html_lines(blocks) == [
        "<p>a b&lt; c</p>",
        '<table id="bias"><thead><tr><th>f</th>',
        "<th>j&lt;</th>",
        "</tr></thead><tbody>",
        "<tr><td>1</td><td>2</td></tr>",
        "</tbody></table>",
        "<p>in both</p><ul>",
        "<li>x y</li>",
        "</ul>",
        '<figure><img alt="panels" src="data:image/png;base64,AAAA"></figure>',
    ]
    assert as_markdown.blocks_markdown(blocks) == (
        "a **b<** c\n\n| f | j< |\n| --- | --- |\n| 1 | 2 |\n\nin both\n\n- x **y**\n"
    )


def test_a_glued_block_continues_the_line_before_it() -> None:
    blocks = [Heading("Latency"), table(["a"], [["1"]], glue=True), Heading("Next", glue=True)]
    assert as_html.html_lines(blocks) == [
        "<h2>Latency</h2><table><thead><tr><th>a</th></tr></thead><tbody>",
        "<tr><td>1</td></tr>",
        "</tbody></table><h2>Next</h2>",
    ]
    assert as_markdown.lines(blocks) == [
        "## Latency",
        "",
        "| a |",
        "|---|",
        "| 1 |",
        "",
        "## Next",
        "",
    ]


@pytest.mark.parametrize("one_line", [False, True])
def test_a_list_on_one_line_or_one_item_a_line(one_line: bool) -> None:
    block = BulletList(None, (("x", False), ("y", True)), one_line=one_line)
    html = as_html.block_lines(block)
    if one_line:
        assert html == ['<ul><li>x</li><li class="bad">y</li></ul>']
    else:
        assert html == ["<ul>", "<li>x</li>", '<li class="bad">y</li>', "</ul>"]
    assert as_markdown.block_lines(block) == ["- x", "- y", ""]


def test_a_section_is_its_blocks_in_both_formats() -> None:
    s = section("T <1>", [Paragraph.of("p & q")])
    assert s.html == "<h2>T &lt;1&gt;</h2><p>p &amp; q</p>"
    assert s.markdown == "## T <1>\n\np & q\n" and s.ran
