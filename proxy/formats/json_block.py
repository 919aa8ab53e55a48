"""JSON tool calls as small models write them when told to (`json_block`).

Owns: the JSON-valued call machinery the JSON family shares (decode one
value at a position, turn it into calls, bare values at a line start, ```json
fences) and the `json_block` format used for emulation. Must not: parse a `{`
in the middle of a sentence, complete truncated JSON, or accept data whose
`name` is not an offered tool (it stays in the text verbatim).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.formats.base import ParsedCall, ParseResult
from proxy.formats.blocks import Block, call_from_object, dumps, find_blocks, splice, tool_list
from proxy.formats.jsonish import loads_lenient, scan_json_value
from proxy.types import JSON, ToolDef

# Keys a bare call object may carry; anything else is data that happens to
# have a "name" (json-block-016).
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
_BAD_ESCAPE = re.compile(r'\\(?=[^\\"/bfnrtu])')
# Control tokens that end a reply (Llama) or an orphan close tag (qwen2.5 drops
# the opener but keeps `</tool_call>`, hermes-015); none of them is prose.
TRAILERS = ("</tool_call>", "<|eom_id|>", "<|eot_id|>", "<|end_of_text|>", "</s>")

_INSTRUCTIONS = """\
# Tools

You may call the following tools. Each line is one tool as JSON:
{tools}

To call a tool, reply with a ```json fenced block holding one object
{{"name": <tool name>, "arguments": <object of arguments>}}
or an array of such objects to call several tools. Put the call block last
in your reply and write nothing after it. Use only the tools listed above.
If no tool is needed, answer normally without any JSON block."""


def skip_space(text: str, pos: int, chars: str = " \t\r\n") -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def value_at(text: str, pos: int) -> tuple[Any, int] | None:
    """The JSON-ish value opening at text[pos] and the index past it; None if cut off."""
    end = scan_json_value(text, pos)
    if end is None:
        return None
    decoded = decode(text[pos:end])
    return None if decoded is None else (decoded, end)


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
    return _BAD_ESCAPE.sub(r"\\\\", token) if token.startswith('"') else token


def calls_of(value: Any, strict_keys: bool) -> list[ParsedCall] | None:
    """A decoded value as calls (object, array, or wrapper); None if not call-shaped."""
    if isinstance(value, dict) and len(value) == 1:
        # llama.cpp's generic format asks for these wrappers.
        if isinstance(value.get("tool_calls"), list):
            value = value["tool_calls"]
        elif isinstance(value.get("tool_call"), dict):
            value = value["tool_call"]
    items = value if isinstance(value, list) else [value]
    calls: list[ParsedCall] = []
    for item in items:
        if not isinstance(item, dict) or (strict_keys and not set(item) <= _CALL_KEYS):
            return None
        call = call_from_object(item)
        if call is None:
            return None
        calls.append(call)
    return calls or None


def make_block(
    text: str, start: int, end: int, calls: Sequence[ParsedCall], tools: Mapping[str, JSON]
) -> Block:
    """A block that is recovered only if every call in it names an offered tool."""
    if all(call.name in tools for call in calls):
        return Block(start, end, tuple(calls))
    return Block(start, end, (), text[start:end])


def chain_at(text: str, pos: int, strict_keys: bool) -> tuple[list[ParsedCall], int] | None:
    """One value or several separated by whitespace / `;` (Llama, qwen2.5-coder leaks)."""
    found = value_at(text, pos)
    if found is None:
        return None
    calls = calls_of(found[0], strict_keys)
    if calls is None:
        return None
    end = found[1]
    while True:
        nxt = skip_space(text, skip_space(text, end, " \t;"), " \t\r\n;")
        more = value_at(text, nxt) if nxt < len(text) and text[nxt] in "{[" else None
        extra = calls_of(more[0], strict_keys) if more is not None else None
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
    return make_block(text, at, line_end, calls, tools)


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
    return make_block(text, at, pos, calls, tools)


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


def render_json_calls(calls: Sequence[ParsedCall]) -> str:
    items = [{"name": call.name, "arguments": call.arguments} for call in calls]
    return dumps(items[0] if len(items) == 1 else items)


class JsonBlockFormat:
    name = "json_block"
    markers: tuple[str, ...] = ("```", "~~~", "{", "[")

    def render_tools(self, tools: Sequence[ToolDef]) -> str:
        return _INSTRUCTIONS.format(tools=tool_list(tools))

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "```json\n" + render_json_calls(calls) + "\n```"

    def render_result(self, name: str, content: str) -> str:
        return f"Result of {name}:\n```\n{content}\n```"

    def parse(self, text: str, tools: Mapping[str, JSON]) -> ParseResult:
        return splice(text, json_blocks(text, tools))


FORMAT = JsonBlockFormat()
