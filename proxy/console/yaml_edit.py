"""Promote and forget learned entries: pure text transforms of capabilities.yaml.

Each takes the file's text and returns the new text; only the lines of the one
entry (and, for promote, the lines added under `models:`) differ, every other
byte is kept. The caller writes the result through the store's locked, atomic
writer, which re-parses it before anything reaches the disk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from proxy.capabilities.load import parse_capabilities
from proxy.capabilities.resolve import normalise_model_name
from proxy.capabilities.schema import BOOKKEEPING, Capabilities, LearnedEntry
from proxy.capabilities.splice import is_top_level, newline_of, section_end, split_lines

_SECTION = re.compile(r"""^(?P<q>["']?)(?P<name>[A-Za-z_]+)(?P=q)[ \t]*:(?P<rest>.*?)\r?\n?$""")


_KEY = re.compile(r"""^(?:"((?:[^"\\]|\\.)*)"|'((?:[^']|'')*)'|([^#'"\s][^#\n]*?))"""
                  r"""[ \t]*:(?:[ \t]|\r?\n|$)""")


class EditError(ValueError):
    """The edit cannot be made (no such learned entry, an entry already exists...)."""


def forget_text(text: str, model: str) -> str:
    """`text` without the `learned:` entry for `model`."""
    lines = split_lines(text)
    start, end = _entry_span(lines, "learned", model)
    return "".join(lines[:start] + lines[end:])


def promote_text(text: str, model: str, today: str) -> str:
    """`text` with `model`'s learned entry moved under `models:`, with a comment naming
    where it came from and `today`'s date; its provenance keys stay behind in the comment."""
    caps, problems = parse_capabilities(text, "capabilities.yaml")
    if caps is None:
        raise EditError(f"the file has errors; fix them first: {problems[0]}")
    name = normalise_model_name(model)
    entry = find_learned(caps, name)
    if entry is None:
        raise EditError(f"no learned entry for {model!r}")
    if any(normalise_model_name(k) == name for k in caps.models):
        raise EditError(f"models: already has an entry for {model!r}; edit that one by hand")
    fields = entry.model_dump(exclude_unset=True, by_alias=True, exclude=set(BOOKKEEPING))
    if not fields:
        raise EditError(f"the learned entry for {model!r} sets no behaviour to promote")
    lines = forget_text(text, model)
    return _add_model(split_lines(lines), name, fields, _comment(entry, today))


def _comment(entry: Any, today: str) -> str:
    said = f"promoted from learned: on {today} (source: {entry.source}, learned {entry.at}"
    if entry.evidence:
        said += f", evidence: {_one_line(entry.evidence)}"
    if entry.validation is not None:
        v = entry.validation
        said += f", validation {v.passed}/{v.total} at {v.at}"
    return said + ")"


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 160 else flat[:157] + "..."


def _add_model(lines: list[str], name: str, fields: Mapping[str, Any], comment: str) -> str:
    newline = newline_of(lines)
    header = _find_section(lines, "models")
    if header is None:  # no models: section yet: add one just before learned:
        at = _find_section(lines, "learned")
        at = len(lines) if at is None else at
        block = ["models:" + newline] + _render(name, fields, comment, "  ", newline)
        return "".join(_ensure_eol(lines[:at], newline) + block + lines[at:])
    rest = _SECTION.match(lines[header])
    if rest and rest.group("rest").strip().split("#")[0].strip() not in ("", "{}"):
        raise EditError("models: is written in flow style; add the entry by hand")
    if rest and rest.group("rest").strip().startswith("{}"):
        lines = lines[:header] + ["models:" + newline] + lines[header + 1:]
    end = section_end(lines, header)
    indent = _child_indent(lines, header, end)
    block = _render(name, fields, comment, indent, newline)
    return "".join(_ensure_eol(lines[:end], newline) + block + lines[end:])


def _render(name: str, fields: Mapping[str, Any], comment: str, indent: str,
            newline: str) -> list[str]:
    # JSON is YAML: every value is written in flow style, strings double-quoted.
    out = [f"{indent}# {comment}{newline}", f"{indent}{json.dumps(name)}:{newline}"]
    for key, value in fields.items():
        out.append(f"{indent}  {key}: {json.dumps(value, ensure_ascii=False)}{newline}")
    return out


def _ensure_eol(lines: list[str], newline: str) -> list[str]:
    if lines and not lines[-1].endswith("\n"):
        return lines[:-1] + [lines[-1] + newline]
    return lines


def _find_section(lines: list[str], section: str) -> int | None:
    for i, line in enumerate(lines):
        found = _SECTION.match(line) if is_top_level(line) else None
        if found and found.group("name") == section:
            return i
    return None


def _child_indent(lines: list[str], header: int, end: int) -> str:
    for line in lines[header + 1:end]:
        if line.strip() and not line.lstrip().startswith("#"):
            return line[: len(line) - len(line.lstrip())]
    return "  "


def _entry_span(lines: list[str], section: str, model: str) -> tuple[int, int]:
    """Line range of `model`'s entry under `section`: its key line through its last
    more-indented line. Comments above the key are a person's and stay."""
    header = _find_section(lines, section)
    if header is None:
        raise EditError(f"no {section}: section in the file")
    end = section_end(lines, header)
    indent = _child_indent(lines, header, end)
    want = normalise_model_name(model)
    for i in range(header + 1, end):
        if _key_at(lines[i], indent) is not None and \
                normalise_model_name(_key_at(lines[i], indent) or "") == want:
            stop = i + 1
            while stop < end and (not lines[stop].strip() or _indent(lines[stop]) > len(indent)):
                stop += 1
            while stop > i + 1 and not lines[stop - 1].strip():
                stop -= 1  # blank lines after the entry separate it from the next one
            return i, stop
    raise EditError(f"no {section} entry for {model!r}")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _key_at(line: str, indent: str) -> str | None:
    """The mapping key on `line` if it sits exactly at `indent`, else None."""
    if not line.startswith(indent) or _indent(line) != len(indent):
        return None
    body = line[len(indent):]
    match = _KEY.match(body)
    if match is None:
        return None
    if match.group(1) is not None:
        return str(json.loads(f'"{match.group(1)}"'))
    if match.group(2) is not None:
        return match.group(2).replace("''", "'")
    return match.group(3)


def find_learned(caps: Capabilities, model: str) -> LearnedEntry | None:
    """The `learned:` entry for `model` in a freshly parsed file (yaml_edit), its key
    matched as the resolver matches it; the running store has `learned_entry`."""
    name = normalise_model_name(model)
    found = caps.learned.get(name)
    if found is None:  # a key a person wrote un-normalised ("llama3.2", "Qwen3:8B")
        found = next((e for k, e in caps.learned.items() if normalise_model_name(k) == name),
                     None)
    return found
