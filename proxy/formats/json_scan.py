"""Scanning model text for JSON values and JSON-written calls: the one home for it.

Owns: where a JSON value at a position ends and what it decodes to (jsonish's
repair ladder, then comments and bad escapes removed), turning decoded values
into calls (object, array or `tool_calls` wrapper), and the JSON call blocks
several formats share: bare values filling their line(s) from a line start,
```json fences, `OPEN json CLOSE` wrappers. A block recovers the calls that
name an offered tool and keeps the others as text (blocks.section_block).
Must not: parse a `{` in the middle of a sentence, complete truncated JSON,
know a particular format's markers, or raise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from proxy.formats.base import ParsedCall
from proxy.formats.blocks import Block, dumps, find_blocks, section_block
from proxy.formats.jsonish import loads_lenient, scan_json_value
from proxy.types import JSON

_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_SPACE = re.compile(r"\s*")
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id", "function", "index"})
_JSON_INFO = frozenset({"", "json", "json5", "jsonc"})
_FENCE_OPEN = re.compile(r"[ \t]{0,3}(`{3,}|~{3,})[ \t]*([\w+.-]*)[ \t]*\n")
BARE_START_PATTERN = r"^[ \t]*[{\[]|^[ \t]{0,3}(?:```|~~~)"
BARE_START = re.compile(BARE_START_PATTERN, re.MULTILINE)
# jsonish's ladder has no step for comments or invalid escapes (they can't be
# repaired without guessing; json-block-008/013); strings are matched whole so a URL's // and
# valid escapes survive.
_COMMENT_OR_STRING = re.compile(
    r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|//[^\n]*|/\*.*?\*/', re.DOTALL
)
# Escapes are matched pairwise from the left, so the second backslash of a valid
# `\\` never starts one (`C:\\Users\dev`); `\u` counts only with four hex digits.
_ESCAPE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.)", re.DOTALL)
_VALID_ESCAPE = frozenset('\\"/bfnrt')
# Control tokens that end a reply (Llama) or an orphan close tag (qwen2.5 drops
# the opener but keeps `</tool_call>`, hermes-015); none of them is prose.
TRAILERS = ("</tool_call>", "<|eom_id|>", "<|eot_id|>", "<|end_of_text|>", "</s>")

def skip_space(text: str, pos: int = 0, chars: str | None = None) -> int:
    """The first position at or after pos that is not whitespace (or not in chars)."""
    if chars is None:
        match = _SPACE.match(text, pos)
        return match.end() if match is not None else pos
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def past_close(text: str, pos: int, closer: str) -> int:
    """Past closer if only whitespace comes before it, else pos: the close may be missing."""
    after = skip_space(text, pos)
    return after + len(closer) if closer and text.startswith(closer, after) else pos


def value_at(text: str, pos: int) -> tuple[Any, int] | None:
    """The JSON-ish value opening at text[pos] and the index past it; None if cut off."""
    end = scan_json_value(text, pos)
    if end is None:
        return None
    decoded = decode(text[pos:end])
    return None if decoded is None else (decoded, end)


def json_at(text: str, pos: int) -> tuple[Any, int] | None:
    """The object or array starting at pos (after whitespace), and the index past it.

    None when there is none, it is cut off, or it cannot be repaired safely.
    """
    start = skip_space(text, pos)
    return value_at(text, start) if text[start : start + 1] in ("{", "[") else None


def decode(raw: str) -> Any | None:
    """jsonish's ladder, then again after removing comments and fixing bad escapes."""
    decoded = loads_lenient(raw)
    if decoded is None:
        decoded = loads_lenient(_COMMENT_OR_STRING.sub(_clean_token, raw))
    return None if decoded is None else decoded[0]


def _clean_token(match: re.Match[str]) -> str:
    token = match.group()
    if token.startswith("/"):
        return ""
    return _ESCAPE.sub(_fix_escape, token) if token.startswith('"') else token


def _fix_escape(match: re.Match[str]) -> str:
    """A valid escape as written; an invalid one (`\\d`) with its backslash doubled."""
    escaped = match.group(1)
    return match.group() if escaped in _VALID_ESCAPE or len(escaped) == 5 else "\\" + match.group()


def call_parts(
    value: Any, strict_keys: bool = False, source: str | None = None
) -> list[tuple[ParsedCall, str]] | None:
    """A decoded value as calls (object, array, or wrapper), each with its text:
    the item as written in source (the text value was decoded from) when the
    items can be found there, else re-serialised (blocks.section_block keeps an
    unknown tool's item as written, at its place).

    None if any item is not call-shaped. With strict_keys, an object with keys
    other than a call's is data that happens to have a "name" (json-block-016).
    """
    if isinstance(value, dict) and len(value) == 1:
        # llama.cpp's generic format asks for these wrappers.
        if isinstance(value.get("tool_calls"), list):
            value = value["tool_calls"]
        elif isinstance(value.get("tool_call"), dict):
            value = value["tool_call"]
    items = value if isinstance(value, list) else [value]
    parts: list[tuple[ParsedCall, str]] = []
    for item in items:
        if not isinstance(item, dict) or (strict_keys and not set(item) <= _CALL_KEYS):
            return None
        call = call_from_object(item)
        if call is None:
            return None
        parts.append((call, dumps(item)))
    return as_written(parts, source) if parts and source is not None else parts or None


def as_written(
    parts: list[tuple[ParsedCall, str]], source: str
) -> list[tuple[ParsedCall, str]]:
    """parts with each item's text taken from source where item_sources finds it."""
    written = item_sources(source, len(parts))
    if written is None:
        return parts
    return [(call, raw) for (call, _), raw in zip(parts, written, strict=True)]


_WRAPPER_KEY = re.compile(r"""\s*(["'])tool_calls?\1\s*:\s*""")


def item_sources(source: str, count: int) -> list[str] | None:
    """The text of each of the count call items in source (an object, an array
    of objects, or a `tool_calls` / `tool_call` wrapper), or None when the items
    cannot be told apart that simply (comments between them, say)."""
    start = skip_space(source)
    if source.startswith("{", start):
        wrapper = _WRAPPER_KEY.match(source, start + 1)
        inner = wrapper.end() if wrapper is not None else -1
        if wrapper is not None and source.startswith(("{", "["), inner):
            found = item_sources(source[inner : scan_json_value(source, inner, False) or inner], count)
            if found is not None:
                return found
        end = scan_json_value(source, start, False)
        return [source[start:end]] if end is not None and count == 1 else None
    if not source.startswith("[", start):
        return None
    items: list[str] = []
    pos = skip_space(source, start + 1)
    while source.startswith("{", pos):
        end = scan_json_value(source, pos, False)
        if end is None:
            return None
        items.append(source[pos:end])
        pos = skip_space(source, end)
        if source.startswith(",", pos):
            pos = skip_space(source, pos + 1)
    return items if len(items) == count and source.startswith("]", pos) else None


def chain_at(text: str, pos: int, strict_keys: bool
             ) -> tuple[list[tuple[ParsedCall, str]], int] | None:
    """One value or several separated by whitespace / `;` (Llama, qwen2.5-coder leaks)."""
    found = value_at(text, pos)
    if found is None:
        return None
    calls = call_parts(found[0], strict_keys, text[pos : found[1]])
    if calls is None:
        return None
    end = found[1]
    while True:
        nxt = skip_space(text, skip_space(text, end, " \t;"), " \t\r\n;")
        more = value_at(text, nxt) if nxt < len(text) and text[nxt] in "{[" else None
        extra = call_parts(more[0], strict_keys, text[nxt : more[1]]) if more is not None else None
        if more is None or extra is None:
            return calls, end
        calls.extend(extra)
        end = more[1]


def line_end_after(text: str, pos: int) -> int | None:
    """Past trailing control tokens to the end of the line; None if prose follows."""
    pos = skip_space(text, pos, " \t")
    stripped = True
    while stripped:
        stripped = False
        ahead = skip_space(text, pos)  # the orphan close may sit on the next line
        for token in TRAILERS:
            if text.startswith(token, ahead):
                pos = skip_space(text, ahead + len(token), " \t")
                stripped = True
    if pos == len(text):
        return pos
    return pos + 1 if text[pos] == "\n" else (pos + 2 if text.startswith("\r\n", pos) else None)


def bare_block(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    """A bare JSON call value that fills its line(s) from a line start."""
    start = skip_space(text, at, " \t")
    found = chain_at(text, start, strict_keys=True)
    if found is None:
        return None
    calls, end = found
    line_end = line_end_after(text, end)
    if line_end is None:
        return None
    return section_block(text, at, line_end, calls, tools)


def fence_block(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    """A ```json (or unlabelled) fence whose whole body is calls; the close may be missing."""
    opener = _FENCE_OPEN.match(text, at)
    if opener is None or opener.group(2).lower() not in _JSON_INFO:
        return None
    start = skip_space(text, opener.end())
    found = (
        chain_at(text, start, strict_keys=False) if text[start : start + 1] in ("{", "[") else None
    )
    if found is None:
        return None
    calls, end = found
    pos = skip_space(text, end)
    fence = opener.group(1)
    if text.startswith(fence, pos):
        after = pos + len(fence)
        pos = line_end_after(text, after) or after
    elif pos != len(text):
        return None
    return section_block(text, at, pos, calls, tools)


def json_blocks(text: str, tools: Mapping[str, JSON]) -> list[Block]:
    """Every fenced or bare line-start JSON call block in text."""
    return find_blocks(text, BARE_START, lambda source, at: generic_at(source, at, tools))


def generic_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    """A bare or fenced JSON call block starting at a line start."""
    if text.startswith(("{", "["), skip_space(text, at, " \t")):
        return bare_block(text, at, tools)
    block = fence_block(text, at, tools)
    opener = _FENCE_OPEN.match(text, at)
    if block is not None or opener is None or opener.group(2).lower() not in _JSON_INFO:
        return block
    # A JSON fence that is not exactly a call is data shown to the reader:
    # nothing inside it is parsed (a call among other lines is an example).
    close = re.compile(r"(?m)^[ \t]{0,3}" + re.escape(opener.group(1)) + r"[^\n]*$")
    found = close.search(text, opener.end())
    end = found.end() if found is not None else len(text)
    return Block(at, end, (), text[at:end])


def valid_name(name: str) -> bool:
    """A plausible function name (rejects template leaks and prose)."""
    return _NAME.fullmatch(name) is not None


def decode_arguments(value: Any) -> dict[str, Any] | None:
    """Arguments as written: an object, or a string holding one (decoded once)."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        if not value.strip():
            return {}
        decoded = loads_lenient(value)
        if decoded is not None and isinstance(decoded[0], dict):
            return dict(decoded[0])
    return None


def call_from_object(obj: Any) -> ParsedCall | None:
    """A decoded `{name, arguments|parameters}` object (or OpenAI wrapper) as a call."""
    if not isinstance(obj, dict):
        return None
    function = obj.get("function")
    if obj.get("type") == "function" and isinstance(function, dict):
        obj = function
    name = obj.get("name")
    if not isinstance(name, str) or not valid_name(name):
        return None
    if "arguments" in obj:
        arguments = decode_arguments(obj["arguments"])
    elif "parameters" in obj:
        arguments = decode_arguments(obj["parameters"])
    else:
        arguments = {}
    return None if arguments is None else ParsedCall(name, arguments)


def wrapped_json_block(
    text: str,
    at: int,
    wrapper: tuple[str, str],
    tools: Mapping[str, JSON],
    to_parts: Callable[[Any], list[tuple[ParsedCall, str]] | None] = call_parts,
) -> Block | None:
    """`OPEN json CLOSE` at `at`: the calls to_parts finds in the JSON; the close is optional."""
    opener, closer = wrapper
    found = json_at(text, at + len(opener))
    parts = to_parts(found[0]) if found is not None else None
    if found is None or parts is None:
        return None
    parts = as_written(parts, text[at + len(opener) : found[1]])
    return section_block(text, at, past_close(text, found[1], closer), parts, tools)


def json_int(value: int) -> int | float:
    """An integer as JSON decoding gives it: beyond 64 bits, a float (as orjson
    does), so that every recovered argument can be serialised again."""
    return value if -(2**63) <= value < 2**64 else float(value)
