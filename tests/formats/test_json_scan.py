"""The one home of JSON scanning: values at a position, calls out of values, shared blocks."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sample_corpus import offered

from proxy.formats import get_format, recover
from proxy.formats.base import ParsedCall
from proxy.formats.json_scan import call_parts, json_at, skip_space, value_at
from proxy.formats.stream import StreamRecovery

TOOLS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string"}}}}


def test_json_at_and_value_at_agree_and_both_drop_comments() -> None:
    text = 'call: {"name": "get_weather", // the tool\n "arguments": {"city": "Paris"}} done'
    start = text.index("{")
    assert json_at(text, len("call:")) == value_at(text, start)
    found = value_at(text, start)
    assert found is not None and found[0] == {"name": "get_weather",
                                              "arguments": {"city": "Paris"}}
    assert text[found[1]:] == " done"


def test_call_parts_reads_objects_arrays_and_wrappers_alike() -> None:
    one = {"name": "get_weather", "arguments": {"city": "Paris"}}
    expected = [ParsedCall("get_weather", {"city": "Paris"})]
    for value in (one, [one], {"tool_calls": [one]}, {"tool_call": one}):
        parts = call_parts(value)
        assert parts is not None and [call for call, _ in parts] == expected
    assert call_parts([one, {"no": "name"}]) is None
    assert call_parts({"name": "get_weather", "city": "Paris"}, strict_keys=True) is None


def test_skip_space_any_whitespace_or_given_characters() -> None:
    assert skip_space(" \t\n\u00a0x", 0) == 4
    assert skip_space(" ;\nx", 0, " ;") == 2


def test_a_block_with_an_unknown_call_recovers_the_offered_one_in_every_json_format() -> None:
    """One rule for partial recovery: offered calls recovered, the others kept as text."""
    pair = ('[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
            '{"name": "book_flight", "arguments": {"to": "JFK"}}]')
    for name, reply in [("hermes", f"<tool_call>{pair}</tool_call>"),
                        ("json_block", f"```json\n{pair}\n```"),
                        ("mistral", f"[TOOL_CALLS]{pair}"),
                        ("lfm2", f"<|tool_call_start|>{pair}<|tool_call_end|>")]:
        result = get_format(name).parse(reply, TOOLS)
        assert result.calls == (ParsedCall("get_weather", {"city": "Paris"}),), name
        assert "book_flight" in result.text and "get_weather" not in result.text, name


def _read_file_call(path_json: str) -> str:
    return f'<tool_call>\n{{"name": "read_file", "arguments": {{"path": "{path_json}"}}}}\n</tool_call>'


def test_a_valid_double_backslash_before_a_letter_survives_the_bad_escape_repair() -> None:
    # `\\` is a valid escape; the `\d` and `\m` after it are not and get doubled.
    text = _read_file_call("C:\\\\Users\\dev\\main.py")
    assert text.count("\\") == 4  # the raw text: \\ then \d and \m
    expected = (ParsedCall("read_file", {"path": "C:\\Users\\dev\\main.py"}),)
    tools = offered(["read_file"])
    assert recover(text, tools)[0].calls == expected
    parser = StreamRecovery(tools)
    streamed = [item for piece in text for item in parser.feed(piece)] + parser.flush()
    assert tuple(streamed) == expected
    # `\u` without four hex digits is no escape either.
    lower = (ParsedCall("read_file", {"path": "C:\\users\\dev"}),)
    assert recover(_read_file_call("C:\\users\\dev"), tools)[0].calls == lower


# Path segments that begin with a letter no JSON escape uses (b f n r t u are
# valid escapes: `C:\new` is ambiguous and stays unrepaired, docs/formats.md section 4).
_SEGMENT = st.text("acdeghijklmopqsvwxyzACDEGHIJKLMNOPQSTUVWXYZ", min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_SEGMENT, st.booleans()), min_size=1, max_size=6))
def test_a_path_mixing_valid_and_invalid_escapes_reads_as_written(
    segments: list[tuple[str, bool]],
) -> None:
    """Each separator written either escaped (two backslashes) or raw (one, an invalid
    escape before the letter): the same path."""
    raw = "".join(("\\\\" if escaped else "\\") + name for name, escaped in segments)
    path = "".join("\\" + name for name, _ in segments)
    result, _ = recover(_read_file_call("C:" + raw), offered(["read_file"]))
    assert result.calls == (ParsedCall("read_file", {"path": "C:" + path}),)
