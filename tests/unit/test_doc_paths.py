"""Every file path that README, the docs and pyproject.toml cite exists in the checkout.

A cited path is a markdown link target or a `backticked` token that looks like a path (it has
a slash, or it is a link). What a run writes (data/, .cache/, a project of one's own) is not
in git and is left out; so are URLs, absolute paths, placeholders (`<judge>`, `*`) and fenced
code blocks (examples, not citations). A markdown link resolves against the citing file's
folder only, as it renders (a link in docs/X.md to `docs/Y.md` opens docs/docs/Y.md); a
backticked path resolves against the repository root, the citing file's folder, or the
package (`sandbox/run.py` as docs/SECURITY.md names a module)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    ROOT / "README.md",
    *sorted(ROOT.glob("*.md")),
    *sorted((ROOT / "docs").glob("*.md")),
]
SOURCES = sorted(set(SOURCES))
# written by runs, never committed: a citation of them is a place to look, not a file to have
GENERATED = ("data/", ".cache/", ".venv/", "my-audit/", "dvc_plots/", "mlruns/", "~/", "$")
GENERATED_FILES = {"dvc.lock", "probes/dvc.lock", "mlflow.db"}  # dvc repro / make probe / runs
BASES = (ROOT, ROOT / "src" / "judgelab", ROOT / "src")
PATHLIKE = re.compile(r"^[A-Za-z0-9_.\-/]+$")
EXTENSIONS = (".md", ".py", ".yaml", ".yml", ".toml", ".json", ".jsonl", ".cff", ".lock", ".html")


def prose(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def cited(text: str) -> set[tuple[str, bool]]:
    """(path, is_link) for each citation in `text` that looks like a path."""
    found: set[tuple[str, bool]] = set()
    body = prose(text)
    for target in re.findall(r"\]\(([^)\s]+)\)", body):
        found.add((target.split("#", 1)[0], True))
    for token in re.findall(r"`([^`\n]+)`", body):
        found.add((token.split(":", 1)[0] if "://" not in token else token, False))
    return {
        (path.rstrip(".,;"), link)
        for path, link in found
        if path
        and "://" not in path
        and not path.startswith(("/", "#", "mailto:"))
        and not path.startswith(GENERATED)
        and path not in GENERATED_FILES
        and PATHLIKE.match(path)
        and (link or "/" in path)
    }


def must_exist(path: str, doc: Path) -> bool:
    """A token whose first part is no file or folder here, and that names no file type, is
    not a path (e.g. `1/2`, `checkpoints/step-NNN/`)."""
    first = path.split("/", 1)[0]
    return (
        path.endswith(EXTENSIONS)
        or (ROOT / first).exists()
        or (doc.parent / first).exists()
        or (ROOT / "src" / "judgelab" / first).exists()
    )


def exists(path: str, doc: Path, link: bool) -> bool:
    """A link opens relative to its document's folder; a backticked path is read as a name."""
    if link:
        return (doc.parent / path).exists()
    return any((base / path).exists() for base in (doc.parent, *BASES))


def test_the_sources_cite_paths() -> None:
    readme = cited((ROOT / "README.md").read_text())
    assert ("docs/METRICS.md", True) in readme
    assert ("reference/params.yaml", False) in readme


@pytest.mark.parametrize("doc", SOURCES, ids=[str(d.relative_to(ROOT)) for d in SOURCES])
def test_every_cited_path_exists(doc: Path) -> None:
    missing = sorted(
        path
        for path, link in cited(doc.read_text())
        if must_exist(path, doc) and not exists(path, doc, link)
    )
    assert not missing, f"{doc.relative_to(ROOT)} cites paths that do not exist: {missing}"


def test_pyproject_cites_docs_that_exist() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    cited_docs = re.findall(r"\b((?:docs/)?[A-Z][A-Z_]+\.md|docs/[A-Za-z_./-]+)", text)
    assert cited_docs, "pyproject.toml cites its docs (readme, comments)"
    missing = [d for d in cited_docs if not (ROOT / d.rstrip(".")).exists()]
    assert not missing, f"pyproject.toml cites: {missing}"


def test_a_missing_path_is_caught(tmp_path: Path) -> None:
    doc = tmp_path / "X.md"
    doc.write_text("See `probes/params.yaml` and [the guide](docs/INSTALL.md); `1/2` is a ratio.")
    missing = [
        p for p, link in cited(doc.read_text()) if must_exist(p, doc) and not exists(p, doc, link)
    ]
    assert sorted(missing) == ["docs/INSTALL.md", "probes/params.yaml"]


def test_a_link_from_docs_to_a_root_path_is_caught() -> None:
    """docs/X.md linking `docs/Y.md` renders as docs/docs/Y.md: missing, though the file
    exists at the root; the same link from README, and `Y.md` from docs/, resolve."""
    in_docs, at_root = ROOT / "docs" / "X.md", ROOT / "README.md"
    assert not exists("docs/METRICS.md", in_docs, link=True)
    assert exists("METRICS.md", in_docs, link=True)
    assert exists("docs/METRICS.md", at_root, link=True)
    assert exists("docs/METRICS.md", in_docs, link=False)  # a backticked name, not a link


def test_readme_quotes_the_reference_report_as_it_is() -> None:
    """The lines README shows from "the report it produces" are the committed reference
    report's own (reference/data/analysis/report.md), not a paraphrase; a line ending in " …"
    is the start of one."""
    readme = (ROOT / "README.md").read_text()
    begin, end = "<!-- report-excerpt:begin -->", "<!-- report-excerpt:end -->"
    block = readme.split(begin, 1)[1].split(end, 1)[0]
    quoted = [line for line in block.splitlines() if line.strip() and not line.startswith("```")]
    report = (ROOT / "reference" / "data" / "analysis" / "report.md").read_text().splitlines()
    assert quoted

    def in_report(line: str) -> bool:
        if line.endswith(" …"):
            return any(r.startswith(line[:-2]) for r in report)
        return line in report

    assert [line for line in quoted if not in_report(line)] == []
