"""The docs tell the truth, and the repository stands on its own.

Every example in docs/formats.md is recovered by the format it documents, every
format the code knows is documented, and no tracked file cites a document or
path outside the repository.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support.tools import WEATHER

from proxy.formats import FORMATS, recover

ROOT = Path(__file__).resolve().parents[2]
FORMATS_DOC = (ROOT / "docs" / "formats.md").read_text()
TOOLS = {"get_weather": WEATHER}


def _examples() -> list[tuple[str, str]]:
    """(format name, example text) from section 3: fenced blocks and table rows."""
    found: list[tuple[str, str]] = []
    sections = re.split(r"^### 3\.\d+ ", FORMATS_DOC, flags=re.MULTILINE)[1:]
    for section in sections:
        names = re.findall(r"`([a-z0-9_]+)`", section.splitlines()[0])
        fences = re.findall(r"^(`{3,4})\n(.*?)\n\1$", section, flags=re.MULTILINE | re.DOTALL)
        for _, body in fences:
            found.append((names[0], body))
        for name, example in re.findall(r"^\| `([a-z0-9_]+)` \|[^|]*\| `(.*)` [|(]", section,
                                        flags=re.MULTILINE):
            found.append((name, example.replace("\\|", "|")))
    return found


EXAMPLES = _examples()


def test_every_format_in_the_table_is_documented_with_an_example() -> None:
    documented = {name for name, _ in EXAMPLES} | set(re.findall(r"`([a-z0-9_]+)`", FORMATS_DOC))
    assert set(FORMATS) <= documented
    assert len(EXAMPLES) >= 20


@pytest.mark.parametrize(("name", "text"), EXAMPLES, ids=[f"{n}-{i}" for i, (n, _) in
                                                         enumerate(EXAMPLES)])
def test_each_example_is_recovered_as_a_call(name: str, text: str) -> None:
    result, _ = recover(text, TOOLS, preferred=name if name in FORMATS else None)
    assert result.calls, f"{name}: no call in {text!r}"
    assert {call.name for call in result.calls} == {"get_weather"}
    assert result.calls[0].arguments == {"city": "Paris"}


_OUTSIDE = re.compile("|".join([
    re.escape("../" + "shared"),
    re.escape("/work" + "/"),
    # A bare citation of an outside document: `formats.md §3`, `backends.md R1`, ...
    r"(?<![\w/.-])(?:formats|backends|STYLE|DESIGN)" + r"\.md",
]))


def test_no_tracked_file_refers_outside_the_repository() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    offenders: list[str] = []
    for name in tracked:
        if name == "tests/docs/test_docs.py":  # names the patterns it looks for
            continue
        path = ROOT / name
        if not path.is_file() or path.suffix in {".png", ".jpg", ".ico", ".gz"}:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _OUTSIDE.search(line):
                offenders.append(f"{name}:{number}: {line.strip()[:100]}")
    assert not offenders, "\n".join(offenders)
