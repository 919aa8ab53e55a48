"""Kimi K3: cases of SGLang's test/registered/function_call/test_kimik3_detector.py and
vLLM's tests/tool_parsers/test_kimi_k3_tool_parser.py with their own tool, whole and
streamed in small and odd deltas; the channel markers never reach content."""

from __future__ import annotations

from typing import Any

import pytest
from sample_corpus import CHUNK_SIZES, stream_in

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.kimi_k3 import FORMAT

PYTHON: dict[str, Any] = {"python": {"type": "object", "properties": {"code": {"type": "string"}}}}
RESPONSE_OPEN, RESPONSE_CLOSE = "<|open|>response<|sep|>", "<|close|>response<|sep|>"
TOOLS_OPEN, TOOLS_CLOSE = "<|open|>tools<|sep|>", "<|close|>tools<|sep|>"
MESSAGE_CLOSE = "<|close|>message<|sep|>"
CONTROLS = (RESPONSE_OPEN, RESPONSE_CLOSE, MESSAGE_CLOSE, "<|sep|>")


def _call(tool: str, index: int, args: dict[str, tuple[str, str]]) -> str:
    """_call_block() of test_kimik3_detector.py."""
    parts = [f'<|open|>call tool="{tool}" index="{index}"<|sep|>']
    parts += [f'<|open|>argument key="{k}" type="{t}"<|sep|>{v}<|close|>argument<|sep|>'
              for k, (t, v) in args.items()]
    return "".join(parts) + "<|close|>call<|sep|>"


def test_single_call_with_typed_argument() -> None:
    """test_detect_and_parse_single_call."""
    text = (RESPONSE_OPEN + "Let me run it." + RESPONSE_CLOSE + TOOLS_OPEN
            + _call("python", 1, {"code": ("string", "print(1)"), "opts": ("object", '{"a": 1}')})
            + TOOLS_CLOSE)
    result, name = recover(text, PYTHON)
    assert name == "kimi_k3"
    assert result.calls == (ParsedCall("python", {"code": "print(1)", "opts": {"a": 1}}),)
    assert result.text == "Let me run it."


@pytest.mark.parametrize("size", CHUNK_SIZES)
def test_split_markers_never_reach_content(size: int) -> None:
    """test_streaming_split_markers (sizes 1, 7, 23 there), and the message close."""
    text = (RESPONSE_OPEN + "Hello!" + RESPONSE_CLOSE + TOOLS_OPEN
            + _call("python", 1, {"code": ("string", "print(2)")}) + TOOLS_CLOSE + MESSAGE_CLOSE)
    calls, content = stream_in(text, PYTHON, size)
    assert calls == (ParsedCall("python", {"code": "print(2)"}),)
    assert content == "Hello!"


@pytest.mark.parametrize("size", CHUNK_SIZES)
def test_reply_without_tools_channel_streams_unwrapped(size: int) -> None:
    """test_detect_and_parse_no_tools_channel, streamed: only the response's text."""
    text = RESPONSE_OPEN + "hi there, 1 < 2 and <b>bold</b>" + RESPONSE_CLOSE + MESSAGE_CLOSE
    calls, content = stream_in(text, PYTHON, size)
    assert calls == ()
    assert content == "hi there, 1 < 2 and <b>bold</b>"
    assert not any(token in content for token in CONTROLS)


def test_two_calls_and_index_attribute() -> None:
    """test_detect_and_parse_multiple_calls."""
    text = (TOOLS_OPEN + _call("python", 1, {"code": ("string", "a")})
            + _call("python", 2, {"code": ("string", "b")}) + TOOLS_CLOSE)
    assert FORMAT.parse(text, PYTHON).calls == (
        ParsedCall("python", {"code": "a"}), ParsedCall("python", {"code": "b"}))


def test_escaped_attributes_and_raw_values() -> None:
    """test_attr_unescaping_and_raw_string_args: attributes unescaped, values raw."""
    text = (TOOLS_OPEN + '<|open|>call tool="python" index="1"<|sep|>'
            '<|open|>argument key="c&amp;d" type="string"<|sep|>say &quot;hi&quot;'
            "<|close|>argument<|sep|><|close|>call<|sep|>" + TOOLS_CLOSE)
    assert FORMAT.parse(text, PYTHON).calls == (
        ParsedCall("python", {"c&d": "say &quot;hi&quot;"}),)


def test_cut_off_call_is_no_call() -> None:
    """test_stream_end_reports_truncated_tools_section: nothing is executed."""
    text = TOOLS_OPEN + '<|open|>call tool="python" index="1"<|sep|>'
    for size in CHUNK_SIZES:
        assert stream_in(text, PYTHON, size)[0] == ()


def test_render_round_trips_typed_values() -> None:
    calls = [ParsedCall("python", {"code": 'print("a&b")', "n": 3, "ok": True, "x": None})]
    assert list(FORMAT.parse(FORMAT.render_calls(calls), PYTHON).calls) == calls


def test_reply_goes_on_at_once_after_the_channel_marker() -> None:
    """The response marker is dropped where it stands: the reply after it is not held
    as a possible block until the end of the answer (streaming latency)."""
    from proxy.formats.stream import StreamRecovery

    parser = StreamRecovery(PYTHON, keep_reasoning=True)
    sent = parser.feed(RESPONSE_OPEN + "Hello") + parser.feed(" there")
    assert "".join(item for item in sent if isinstance(item, str)) == "Hello there"
