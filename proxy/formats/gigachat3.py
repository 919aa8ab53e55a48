"""GigaChat 3 tool calls: a `function call<|role_sep|>` message after `<|message_sep|>`.

Owns: the call message GigaChat 3 writes after its text, `<|message_sep|>`,
blanks, the header `function call<|role_sep|>`, a newline and one JSON
`{"name", "arguments"}` object; GigaChat 3.1's `<|function_call|>` + JSON; the
`</s>` that may end the reply (vLLM `gigachat3_tool_parser.py` and its tests).
`<|message_sep|>` ends the text message and is markup wherever it stands, so
it is a control token (formats.detect drops it). Must not: execute a JSON
object that is cut off.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from proxy.formats.base import ParsedCall
from proxy.formats.block_format import BlockFormat
from proxy.formats.blocks import Block, dumps
from proxy.formats.json_scan import call_from_object, json_at, past_close
from proxy.types import JSON

_MESSAGE_SEP, _FUNCTION_CALL = "<|message_sep|>", "<|function_call|>"
_HEADER = re.compile(r"\s*function call\s*<\|role_sep\|>")
_EOS = "</s>"

_INSTRUCTIONS = """\
You can call the following functions:
{tools}

To call a function, end your message with <|message_sep|>, then write the line \
"function call<|role_sep|>" and a JSON object with the function's "name" and "arguments":
<|message_sep|>

function call<|role_sep|>
{{"name": "FUNCTION_NAME", "arguments": {{"argument": "value"}}}}"""


def _parse_at(text: str, at: int, tools: Mapping[str, JSON]) -> Block | None:
    if text.startswith(_FUNCTION_CALL, at):
        body = at + len(_FUNCTION_CALL)
    else:
        header = _HEADER.match(text, at + len(_MESSAGE_SEP))
        if header is None:
            return None  # the end of a text message, not a call
        body = header.end()
    found = json_at(text, body)
    call = call_from_object(found[0]) if found is not None else None
    if found is None or call is None:
        return None
    end = past_close(text, found[1], _EOS)
    if call.name in tools:
        return Block(at, end, (call,))
    return Block(at, end, (), text[at:end].replace(_MESSAGE_SEP, ""))  # markup even so


class GigaChat3(BlockFormat):
    name = "gigachat3"
    markers: tuple[str, ...] = (_MESSAGE_SEP, _FUNCTION_CALL)
    controls: tuple[str, ...] = (_MESSAGE_SEP,)

    instructions = _INSTRUCTIONS

    def render_calls(self, calls: Sequence[ParsedCall]) -> str:
        return "".join(
            f"{_MESSAGE_SEP}\n\nfunction call<|role_sep|>\n"
            + dumps({"name": call.name, "arguments": call.arguments})
            for call in calls
        )

    parse_at = staticmethod(_parse_at)


FORMAT = GigaChat3()
