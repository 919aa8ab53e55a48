"""The call syntax Gemma 4 and FunctionGemma share: `call:NAME{key:VALUE,...}`.

Owns: reading and writing that syntax, parameterised by the string delimiter
(Gemma 4's `<|"|>`, FunctionGemma's `<escape>`), and the block shape both put
around a call (an open tag, the call, a close tag that may be missing after
complete arguments, stray close tags after it). Keys are bare words; values
are delimited strings (raw: what stands between the delimiters is the value,
backslashes included), JSON strings, numbers, booleans, null, `{}` and `[]`.
Must not: unescape a delimited string, execute a call whose braces or
strings are cut off, or recurse without bound.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.blocks import Block, dumps, section_block
from proxy.formats.json_scan import json_int, skip_space, valid_name
from proxy.types import JSON

_HEAD = re.compile(r"\s*call:([A-Za-z_][\w.\-]*)\s*(?=\{)")
_WORD = re.compile(r"[A-Za-z_][\w.\-]*")
_BARE_KEY = re.compile(r"[^\s:{}\[\],\"<]+")
# A bare value (a number, a word) ends at a separator, a line end or markup: never
# scanning on to the end of the reply, once per marker (quadratic on hostile text).
_BARE_VALUE = re.compile(r"[^,}\]\n<]*")
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORDS: dict[str, Any] = {"true": True, "false": False, "null": None,
                          "True": True, "False": False, "None": None}
_MAX_DEPTH = 64


class _Bad(Exception):
    """Not this syntax, or cut off: the text stays as it is."""


class _Reader:
    def __init__(self, text: str, delim: str) -> None:
        self.text, self.delim = text, delim

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        text = self.text
        pos = skip_space(text, pos)
        if depth > _MAX_DEPTH or pos >= len(text):
            raise _Bad
        if text.startswith(self.delim, pos):
            return self.delimited(pos)
        if text[pos] == '"':
            return self.json_string(pos)
        if text[pos] == "{":
            return self.mapping(pos + 1, depth)
        if text[pos] == "[":
            return self.sequence(pos + 1, depth)
        match = _BARE_VALUE.match(text, pos)
        assert match is not None  # may be empty
        raw = match.group().strip()
        if not raw or match.end() >= len(text):
            raise _Bad
        return _scalar(raw), match.end()

    def delimited(self, pos: int) -> tuple[str, int]:
        start = pos + len(self.delim)
        end = self.text.find(self.delim, start)
        if end < 0:
            raise _Bad
        return self.text[start:end], end + len(self.delim)

    def json_string(self, pos: int) -> tuple[str, int]:
        match = _JSON_STRING.match(self.text, pos)
        if match is None:
            raise _Bad
        try:
            value = json.loads(match.group(), strict=False)
        except ValueError:
            value = match.group()[1:-1]
        return str(value), match.end()

    def key(self, pos: int) -> tuple[str, int]:
        pos = skip_space(self.text, pos)
        if self.text.startswith(self.delim, pos):
            return self.delimited(pos)
        if self.text.startswith('"', pos):
            return self.json_string(pos)
        match = _BARE_KEY.match(self.text, pos)
        if match is None:
            raise _Bad
        return match.group(), match.end()

    def mapping(self, pos: int, depth: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        pos = skip_space(self.text, pos)
        if self.text.startswith("}", pos):
            return out, pos + 1
        while True:
            key, pos = self.key(pos)
            pos = skip_space(self.text, pos)
            if not self.text.startswith(":", pos):
                raise _Bad
            out[key], pos = self.value(pos + 1, depth + 1)
            pos = self.separator(pos, "}")
            if self.text.startswith("}", pos - 1):
                return out, pos

    def sequence(self, pos: int, depth: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        pos = skip_space(self.text, pos)
        if self.text.startswith("]", pos):
            return out, pos + 1
        while True:
            item, pos = self.value(pos, depth + 1)
            out.append(item)
            pos = self.separator(pos, "]")
            if self.text.startswith("]", pos - 1):
                return out, pos

    def separator(self, pos: int, close: str) -> int:
        """Past `,` or the close bracket (a trailing comma allowed)."""
        pos = skip_space(self.text, pos)
        if self.text.startswith(",", pos):
            after = skip_space(self.text, pos + 1)
            return after + 1 if self.text.startswith(close, after) else pos + 1
        if self.text.startswith(close, pos):
            return pos + 1
        raise _Bad


def _scalar(raw: str) -> Any:
    if raw in _WORDS:
        return _WORDS[raw]
    if _NUMBER.fullmatch(raw):
        return json_int(int(raw)) if raw.lstrip("-").isdigit() else float(raw)
    return raw  # a bare word the model did not quote: its text


def parse_call(text: str, pos: int, delim: str) -> tuple[ParsedCall, int] | None:
    """`call:NAME{...}` at pos (after blanks): the call and the index past its `}`."""
    head = _HEAD.match(text, pos)
    if head is None or not valid_name(head.group(1)):
        return None
    try:
        arguments, end = _Reader(text, delim).mapping(head.end() + 1, 0)
    except (_Bad, RecursionError, ValueError):
        return None
    return ParsedCall(head.group(1), arguments), end


def call_block(
    text: str, at: int, tags: tuple[str, str], delim: str, tools: Mapping[str, JSON],
    noise: Sequence[str] = (),
) -> Block | None:
    """One call between tags[0] and tags[1] at `at`; the close may be missing after
    a complete call. Tags in `noise` right after it (stray repeats) go with it."""
    found = parse_call(text, at + len(tags[0]), delim)
    if found is None:
        return None
    call, end = found
    after = skip_space(text, end)
    if text.startswith(tags[1], after):
        end = after + len(tags[1])
    while (tag := next((t for t in noise if text.startswith(t, skip_space(text, end))), None)):
        end = skip_space(text, end) + len(tag)
    return section_block(text, at, end, [(call, text[at:end])], tools)


def render_call(call: ParsedCall, delim: str) -> str:
    return f"call:{call.name}{render_value(call.arguments, delim)}"


def render_value(value: Any, delim: str) -> str:
    """Strings delimited (JSON-quoted when they hold the delimiter), the rest as JSON."""
    if isinstance(value, str):
        return f"{delim}{value}{delim}" if delim not in value else dumps(value)
    if isinstance(value, dict):
        items = (f"{_render_key(k, delim)}:{render_value(v, delim)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(render_value(item, delim) for item in value) + "]"
    return dumps(value)


def _render_key(key: str, delim: str) -> str:
    return key if _WORD.fullmatch(key) else render_value(key, delim)
