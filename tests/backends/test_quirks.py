from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.backends.quirks import EMPTY_STREAM, first_line, is_empty_stream, quirk_for_error
from proxy.types import Profile

TOOLS: Any = [{"type": "function", "function": {"name": "get_weather"}}]
CALL_TURN: Any = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]}
EMPTY_500 = orjson.dumps({"error": {"message": "", "type": "internal_server_error",
                                    "param": None, "code": None}})
PYDANTIC_500 = orjson.dumps({"error": {"message": "7 validation errors:\n  {'type': "
                                       "'string_type', 'msg': 'Input should be a valid string',"
                                       " 'input': None}", "type": "internal_server_error"}})


def _request(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}


def test_required_5xx_asks_for_the_rewrite() -> None:
    quirk = quirk_for_error(500, EMPTY_500, _request(tools=TOOLS, tool_choice="required"),
                            Profile("m"))
    assert quirk is not None and quirk.field == "required_tool_choice"
    assert quirk.apply(Profile("m")).required_tool_choice == "rewrite"
    assert quirk.evidence == "HTTP 500: empty error message"


def test_null_content_5xx_asks_for_empty_text() -> None:
    sent = _request(tools=TOOLS, messages=[{"role": "user", "content": "hi"}, CALL_TURN])
    quirk = quirk_for_error(500, PYDANTIC_500, sent, Profile("m"))
    assert quirk is not None and quirk.apply(Profile("m")).null_content is False
    assert quirk.observation("m").kind == "null_content_failed"
    assert quirk.evidence == "HTTP 500: 7 validation errors:"


def test_both_present_null_named_in_the_message_goes_first() -> None:
    sent = _request(tools=TOOLS, tool_choice="required",
                    messages=[{"role": "user", "content": "hi"}, CALL_TURN])
    first = quirk_for_error(500, PYDANTIC_500, sent, Profile("m"))
    assert first is not None and first.field == "null_content"
    second = quirk_for_error(500, EMPTY_500, sent, first.apply(Profile("m")))
    assert second is not None and second.field == "required_tool_choice"
    assert quirk_for_error(500, EMPTY_500, sent, second.apply(first.apply(Profile("m")))) is None


@pytest.mark.parametrize("status", [400, 404, 429])
def test_client_errors_are_never_quirks(status: int) -> None:
    sent = _request(tools=TOOLS, tool_choice="required")
    assert quirk_for_error(status, EMPTY_500, sent, Profile("m")) is None


def test_a_5xx_without_either_trigger_is_not_a_quirk() -> None:
    assert quirk_for_error(500, EMPTY_500, _request(tools=TOOLS, tool_choice="auto"),
                           Profile("m")) is None
    assert quirk_for_error(503, b"busy", _request(), Profile("m")) is None


def test_empty_stream() -> None:
    assert is_empty_stream(None) and is_empty_stream(b"\n\n")
    assert not is_empty_stream(b"data: {}\n\n")
    assert EMPTY_STREAM.apply(Profile("m")).stream_tools is False


def test_first_line() -> None:
    assert first_line("\n  boom  \nrest") == "boom" and first_line("") == ""
