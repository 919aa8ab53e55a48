from __future__ import annotations

import pytest
from sample_corpus import SCHEMAS

from proxy.formats.base import ParsedCall
from proxy.formats.mistral import FORMAT

OSLO = ParsedCall("get_weather", {"city": "Oslo"})
ROME = ParsedCall("get_weather", {"city": "Rome"})


def _parse(text: str) -> tuple[list[ParsedCall], str | None]:
    result = FORMAT.parse(text, SCHEMAS)
    return list(result.calls), result.text


@pytest.mark.parametrize(
    ("text", "calls", "rest"),
    [
        ('[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Oslo"}}]', [OSLO], None),
        (
            (
                '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "a1B2c3D4e"}, '
                '{"name": "get_weather", "arguments": {"city": "Rome"}}]'
            ),
            [OSLO, ROME],
            None,
        ),
        ('[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Oslo"}', [OSLO], None),
        (
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}',
            [OSLO, ROME],
            None,
        ),
        (
            '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}get_weather[ARGS]{"city": "Rome"}',
            [OSLO, ROME],
            None,
        ),
        (
            "[TOOL_CALLS][{'name': 'get_weather', 'arguments': {'city': 'Oslo'}}] I hope this helps!",
            [OSLO],
            "I hope this helps!",
        ),
        (
            'Let me check.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}}]</s>',
            [OSLO],
            "Let me check.",
        ),
        ('[{"name": "get_weather", "arguments": {"city": "Oslo"}}]', [OSLO], None),  # token skipped
        (
            '[TOOL_CALLS]get_weather[ARGS]{"city": "x]}"}',
            [ParsedCall("get_weather", {"city": "x]}"})],
            None,
        ),
    ],
)
def test_shapes(text: str, calls: list[ParsedCall], rest: str | None) -> None:
    got, left = _parse(text)
    assert got == calls
    assert (left.strip() if left else None) == rest


@pytest.mark.parametrize(
    "text",
    [
        "Mistral models emit [TOOL_CALLS] before a JSON array.",
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Os',
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}get_weather[ARGS]{"city": "Ro',
        '[TOOL_CALLS][{"name": "book_flight", "arguments": {}}]',
    ],
)
def test_not_calls(text: str) -> None:
    assert _parse(text) == ([], text)
