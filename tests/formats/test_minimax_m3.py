"""MiniMax-M3: the nested case of vLLM's tests/tool_parsers/test_minimax_m3_tool_parser.py
with its own schema, whole and streamed in small and odd deltas."""

from __future__ import annotations

from typing import Any

import pytest
from sample_corpus import CHUNK_SIZES, SCHEMAS, stream_in

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.minimax_m3 import FORMAT, NS

# test_minimax_m3_tool_parser.py sample_tools(): create_order.
ORDER: dict[str, Any] = {"create_order": {"type": "object", "properties": {
    "user_id": {"type": "integer"}, "urgent": {"type": "boolean"}, "note": {"type": "string"},
    "shipping": {"type": "object", "properties": {"city": {"type": "string"},
                                                  "zip": {"type": "integer"}}},
    "items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string"}, "qty": {"type": "integer"}}}},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    "duplicate_demo": {"type": "object"}}}}


def _el(key: str, value: str) -> str:
    return f"{NS}<{key}>{value}{NS}</{key}>"


# build_order_call() of the same test file.
ORDER_CALL = (
    f"{NS}<tool_call>\n" + f'{NS}<invoke name="create_order">'
    + _el("user_id", "42") + _el("urgent", "true") + _el("note", "Please leave at front desk.")
    + _el("shipping", _el("city", "Singapore") + _el("zip", "018956"))
    + _el("items", _el("item", _el("sku", "book-001") + _el("qty", "2"))
          + _el("item", _el("sku", "pen-007") + _el("qty", "5")))
    + _el("metadata", _el("source", "mobile") + _el("campaign", "may-launch"))
    + _el("duplicate_demo", _el("tag", "a") + _el("tag", "b"))
    + f"{NS}</invoke>\n" + f"{NS}</tool_call>"
)
EXPECTED = ParsedCall("create_order", {
    "user_id": 42, "urgent": True, "note": "Please leave at front desk.",
    "shipping": {"city": "Singapore", "zip": 18956},
    "items": [{"sku": "book-001", "qty": 2}, {"sku": "pen-007", "qty": 5}],
    "metadata": {"source": "mobile", "campaign": "may-launch"},
    "duplicate_demo": {"tag": ["a", "b"]},
})


def test_nested_call_whole() -> None:
    """test_non_streaming_nested_tool_call: content before the call is kept."""
    result = FORMAT.parse("I will create it.\n" + ORDER_CALL, ORDER)
    assert result.calls == (EXPECTED,)
    assert result.text == "I will create it.\n"


@pytest.mark.parametrize("size", CHUNK_SIZES)
def test_nested_call_streamed(size: int) -> None:
    """test_streaming_nested_tool_call, in every small and odd delta size."""
    calls, text = stream_in("I will create it.\n" + ORDER_CALL + "\nDone.", ORDER, size)
    assert calls == (EXPECTED,)
    assert text == "I will create it.\n\nDone."


def test_without_the_namespace_marker() -> None:
    """A backend that drops the marker (a special token skipped) leaves plain tags."""
    text = ORDER_CALL.replace(NS, "")
    assert recover(text, ORDER)[0].calls == (EXPECTED,)


def test_a_string_value_that_looks_like_a_number_stays_a_string() -> None:
    text = (f'{NS}<tool_call>\n{NS}<invoke name="bash">' + _el("command", "007")
            + f"{NS}</invoke>\n{NS}</tool_call>")
    assert FORMAT.parse(text, SCHEMAS).calls == (ParsedCall("bash", {"command": "007"}),)


def test_rendered_prompt_shows_the_namespace_marker() -> None:
    assert NS + "<invoke" in FORMAT.render_tools([])


def test_a_run_of_cut_off_invokes_costs_no_rescans() -> None:
    """Hostile model output: each cut-off value used to search to the end of the text
    (168 KB took 40 s); the search stops at the next invoke tag now."""
    import time

    text = (f'{NS}<tool_call>{NS}<invoke name="get_weather">{NS}<city>x') * 2000
    started = time.process_time()
    assert recover(text, SCHEMAS)[0].calls == ()
    assert time.process_time() - started < 10
