"""The README and docs render as their authors meant: tables parse as tables, links resolve.

GitHub renders a table only when its header, delimiter row and every row hold
together; a row cut off by a paragraph or a heading shows up as a line of pipes.
markdown-it-py with its table rule is CommonMark plus GFM tables, as GitHub parses them.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_PARSER = MarkdownIt("commonmark").enable("table")


def _tokens(path: Path) -> list[Token]:
    return _PARSER.parse(path.read_text())


def _table_lines(tokens: list[Token]) -> set[int]:
    lines: set[int] = set()
    for token in tokens:
        if token.type == "table_open" and token.map is not None:
            lines.update(range(*token.map))
    return lines


def _code_lines(tokens: list[Token]) -> set[int]:
    lines: set[int] = set()
    for token in tokens:
        if token.type in ("fence", "code_block") and token.map is not None:
            lines.update(range(*token.map))
    return lines


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_table_row_renders_inside_a_table(path: Path) -> None:
    tokens = _tokens(path)
    tables, code = _table_lines(tokens), _code_lines(tokens)
    stray = [f"{path.name}:{number + 1}: {line[:80]}"
             for number, line in enumerate(path.read_text().splitlines())
             if line.startswith("|") and number not in tables and number not in code]
    assert not stray, "rows outside any table:\n" + "\n".join(stray)


def _links(tokens: list[Token]) -> list[str]:
    found: list[str] = []
    for token in tokens:
        for child in token.children or []:
            if child.type == "link_open":
                found.append(str(child.attrs.get("href", "")))
    return found


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    anchors: set[str] = set()
    tokens = _tokens(path)
    for heading, inline in itertools.pairwise(tokens):
        if heading.type == "heading_open":
            text = inline.content.lower()
            anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_every_relative_link_resolves(path: Path) -> None:
    broken: list[str] = []
    for href in _links(_tokens(path)):
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or href.startswith("mailto:"):
            continue
        target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
        if not target.exists():
            broken.append(f"{href}: no such file")
        elif parts.fragment and target.suffix == ".md" \
                and parts.fragment not in _anchors(target):
            broken.append(f"{href}: no such heading")
    assert not broken, f"{path.name}:\n" + "\n".join(broken)


def test_a_broken_table_is_caught() -> None:
    # The check above can fail: a row cut off from its table by a paragraph.
    text = "| a | b |\n|---|---|\n| 1 | 2 |\n\ntext\n| 3 | 4 |\n"
    tokens = _PARSER.parse(text)
    tables = _table_lines(tokens)
    assert [n for n, line in enumerate(text.splitlines())
            if line.startswith("|") and n not in tables] == [5]


def test_docs_capabilities_names_every_key_of_an_entry() -> None:
    # Every key a person may write in an entry has a heading of its own in
    # docs/capabilities.md, so no key is only discoverable by reading the code.
    from proxy.capabilities.schema import ModelEntry

    doc = (ROOT / "docs" / "capabilities.md").read_text()
    headed = set(re.findall(r"^###+ `([a-z_]+)`", doc, flags=re.MULTILINE))
    keys = {field.alias or name for name, field in ModelEntry.model_fields.items()}
    assert keys - headed == set()
