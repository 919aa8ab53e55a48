"""DeepSeek V4: vLLM's tests/tool_parsers/test_deepseekv4_tool_parser.py, whole and
streamed in small and odd deltas."""

from __future__ import annotations

import pytest
from sample_corpus import CHUNK_SIZES, SCHEMAS, stream_in

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.deepseek_v4 import FORMAT


def _block(name: str, params: dict[str, tuple[str, str]]) -> str:
    """build_tool_call() of the test file, with string="true|false" per parameter."""
    body = "".join(f'<｜DSML｜parameter name="{k}" string="{s}">{v}</｜DSML｜parameter>\n'
                   for k, (s, v) in params.items())
    return (f'<｜DSML｜tool_calls>\n<｜DSML｜invoke name="{name}">\n{body}</｜DSML｜invoke>\n'
            "</｜DSML｜tool_calls>")


TEXT = "Let me check. " + _block("search_docs", {"query": ("true", "deepseek v4"),
                                                 "max_results": ("false", "3")})
CALL = ParsedCall("search_docs", {"query": "deepseek v4", "max_results": 3})


def test_extract_tool_calls() -> None:
    """test_extract_tool_calls: the text before the block is content."""
    result, name = recover(TEXT, SCHEMAS)
    assert (result.calls, result.text, name) == ((CALL,), "Let me check. ", "deepseek_v4")


@pytest.mark.parametrize("size", CHUNK_SIZES)
def test_streaming_extracts_complete_invokes(size: int) -> None:
    """test_streaming_extracts_complete_invokes (deltas of 5 there)."""
    text = TEXT + "<｜end▁of▁sentence｜>"
    whole, _ = recover(text, SCHEMAS)
    assert whole.calls == (CALL,) and (whole.text or "").strip() == "Let me check."
    assert stream_in(text, SCHEMAS, size) == (whole.calls, whole.text)


def test_v32_wrapper_is_not_v4s() -> None:
    """test_function_calls_block_is_not_accepted: V4's module reads only its wrapper."""
    v32 = _block("search_docs", {"query": ("true", "vllm")}).replace("tool_calls", "function_calls")
    assert FORMAT.parse(v32, SCHEMAS).calls == ()
