"""GigaChat 3: vLLM's tests/tool_parsers/test_gigachat3_tool_parser.py with its own
tool, whole and streamed in small and odd deltas; the separators never reach content."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sample_corpus import CHUNK_SIZES, stream_in

from proxy.formats import recover
from proxy.formats.base import ParsedCall

MEMORY: dict[str, Any] = {"manage_user_memory": {"type": "object", "properties": {
    "action": {"type": "string"}, "id": {"type": "string"}, "content": {"type": "object"}}}}
MSG_SEP, HEADER = "<|message_sep|>\n\n", "function call<|role_sep|>\n"
# COMPLEX_ARGS_DICT of the same test file.
ARGS = {"action": "create", "id": "preferences", "content": {
    "short_answers": True, "hate_emojis": True, "english_ui": False,
    "russian_math_explanations": True}}
CALL_JSON = json.dumps({"name": "manage_user_memory", "arguments": ARGS}, ensure_ascii=False)
CONTENT = "I'll check that for you."


@pytest.mark.parametrize("text", [
    CONTENT + MSG_SEP + HEADER + CALL_JSON,             # MIXED_OUTPUT_GIGACHAT3
    CONTENT + MSG_SEP + HEADER + CALL_JSON + "</s>",    # ... with EOS
    CONTENT + "<|function_call|>" + CALL_JSON + "</s>",  # MIXED_OUTPUT_GIGACHAT31 + EOS
], ids=["gigachat3", "gigachat3-eos", "gigachat31-eos"])
@pytest.mark.parametrize("size", CHUNK_SIZES)
def test_split_special_tokens_do_not_leak(text: str, size: int) -> None:
    """test_streaming_split_special_tokens (deltas of 3 there) and test_tool_call."""
    whole, name = recover(text, MEMORY)
    assert name == "gigachat3"
    assert whole.calls == (ParsedCall("manage_user_memory", ARGS),)
    assert whole.text == CONTENT
    assert stream_in(text, MEMORY, size) == (whole.calls, CONTENT)


@pytest.mark.parametrize("size", CHUNK_SIZES)
def test_message_separator_without_call_is_dropped(size: int) -> None:
    text = "Готово.<|message_sep|>"
    assert recover(text, MEMORY)[0].text == "Готово."
    assert stream_in(text, MEMORY, size) == ((), "Готово.")


def test_no_tool_call() -> None:
    """test_no_tool_call."""
    assert recover("How can I help you today?", MEMORY)[0].calls == ()


def test_arguments_cut_off_are_no_call() -> None:
    text = MSG_SEP + HEADER + CALL_JSON[:-3]
    for size in CHUNK_SIZES:
        calls, content = stream_in(text, MEMORY, size)
        assert calls == () and content == text.replace("<|message_sep|>", "")
