"""Merge learned facts into the `learned:` section of capabilities.yaml text.

Pure: text and facts in, text out. Only the lines of the top-level `learned:`
key are re-rendered (by ruamel's round trip, so comments inside the section
survive); every byte before and after it is copied as it was, because the rest
of the file is a person's. Must not: decide *when* to write, or write (the
store's job: store.py, write.py), or touch a byte outside `learned:`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from io import StringIO
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString

from proxy.capabilities.learning import LearnedFact, merge_fact
from proxy.capabilities.load import parse_capabilities
from proxy.capabilities.resolve import normalise_model_name
from proxy.capabilities.schema import PROVENANCE, Capabilities

_LEARNED_KEY = re.compile(r"""^(learned|"learned"|'learned')[ \t]*:(?=[ \t]|\r?$)""")
_OLDEST = datetime.min


def splice_learned(
    text: str, facts: Sequence[LearnedFact], *, max_entries: int | None = None
) -> str:
    """`text` with facts merged into its top-level `learned:`; all else byte-identical.

    With `max_entries`, the entries learned longest ago (`at`) are removed
    until at most that many remain.
    """
    lines = split_lines(text)
    span = _learned_span(lines)
    yaml = _yaml()
    doc = yaml.load("".join(lines[span[0]:span[1]])) if span else None
    doc = doc if isinstance(doc, CommentedMap) else CommentedMap()
    learned = doc.get("learned")
    learned = doc["learned"] = learned if isinstance(learned, CommentedMap) else CommentedMap()
    learned.fa.set_block_style()
    for fact in facts:
        _merge_fact(learned, fact)
    if max_entries is not None:
        for key in oldest_first(learned)[: max(0, len(learned) - max_entries)]:
            del learned[key]
    out = StringIO()
    yaml.dump(doc, out)
    # ruamel writes LF; the section is written with the file's own line ending.
    newline = newline_of(lines)
    section = out.getvalue().replace("\r\n", "\n").replace("\n", newline)
    if span is None:
        return text + (newline if text and not text.endswith("\n") else "") + section
    return "".join(lines[: span[0]]) + section + "".join(lines[span[1]:])


def splice_checked(
    text: str, current: Capabilities, facts: Sequence[LearnedFact], max_entries: int
) -> tuple[str, Capabilities] | None:
    """`splice_learned` and what the new text loads as, proven not to change what the
    person's sections mean; None if it cannot be done (the new text would not load,
    or would read differently)."""
    try:
        new_text = splice_learned(text, facts, max_entries=max_entries)
    except Exception:  # noqa: BLE001 - ruamel raises assorted types on odd layouts
        return None
    updated = parse_capabilities(new_text, "")[0]
    if updated is None or _outside(updated) != _outside(current):
        return None
    return new_text, updated


def _outside(caps: Capabilities) -> Capabilities:
    return caps.model_copy(update={"learned": {}})


def oldest_first(entries: dict[Any, Any]) -> list[Any]:
    """Keys of learned entries, least recently learned first (file order breaks ties)."""
    order = {key: i for i, key in enumerate(entries)}
    return sorted(entries, key=lambda key: (_learned_at(entries[key]), order[key]))


def _learned_at(entry: object) -> datetime:
    at = entry.get("at") if isinstance(entry, dict) else getattr(entry, "at", None)
    try:
        parsed = datetime.fromisoformat(str(at))
    except ValueError:
        return _OLDEST  # no usable time: the first to go
    return parsed if parsed.tzinfo is None else parsed.astimezone(UTC).replace(tzinfo=None)


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    yaml.width = 4096  # evidence strings stay on one line
    return yaml


def _merge_fact(learned: CommentedMap, fact: LearnedFact) -> None:
    # An entry already there under another spelling of the same model is the
    # one to update (the file may not hold two keys naming one model).
    name = normalise_model_name(fact.model)
    key = next((k for k in learned if normalise_model_name(str(k)) == name), None)
    entry = learned.get(key) if key is not None else None
    if not isinstance(entry, CommentedMap):
        entry = CommentedMap()
        if key is not None:
            del learned[key]
        key = DoubleQuotedScalarString(fact.key())
    entry.fa.set_block_style()
    learned[key] = entry
    _merge_into(entry, fact)


def _merge_into(entry: CommentedMap, fact: LearnedFact) -> None:
    """merge_fact applied in place, so ruamel keeps the entry's comments and order."""
    merged = merge_fact(entry, fact)
    for key in [k for k in entry if k not in merged or k in PROVENANCE]:
        del entry[key]
    for key, value in merged.items():
        if isinstance(value, list):
            value = CommentedSeq(value)
            value.fa.set_flow_style()
        if key == "correction" and isinstance(value, dict):  # its `at` must stay a string
            value = {**value, "at": DoubleQuotedScalarString(value["at"])}
        entry[key] = DoubleQuotedScalarString(value) if key == "at" else value


def _learned_span(lines: Sequence[str]) -> tuple[int, int] | None:
    """Line range of the top-level `learned:` key, without trailing blanks and col-0 comments."""
    start = next((i for i, line in enumerate(lines) if _LEARNED_KEY.match(line)), None)
    return None if start is None else (start, section_end(lines, start))


def split_lines(text: str) -> list[str]:
    """text as lines that keep their endings (the last may have none): joined, text again."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def newline_of(lines: Sequence[str]) -> str:
    """The file's line ending, as its first line has it: what lines added to it use."""
    return "\r\n" if lines and lines[0].endswith("\r\n") else "\n"


def is_top_level(line: str) -> bool:
    return bool(line.strip()) and not line[0].isspace() and not line.startswith("#")


def section_end(lines: Sequence[str], header: int) -> int:
    """Index after the last line of the top-level section whose key is at `header`;
    trailing blanks and column-0 comments introduce what follows, so they are left out."""
    end = header + 1
    while end < len(lines) and not is_top_level(lines[end]):
        end += 1
    while end > header + 1 and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    return end
