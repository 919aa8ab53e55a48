"""The one home of JSON scanning: values at a position, calls out of values, shared blocks."""

from __future__ import annotations

from proxy.formats import get_format
from proxy.formats.base import ParsedCall
from proxy.formats.json_scan import call_parts, json_at, skip_space, value_at

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
