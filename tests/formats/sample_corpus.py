"""Test support for the format modules: the shared corpus sample and call strategies."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from proxy.formats.base import ParsedCall, ParseResult, TextFormat

# A sample of the text-call corpus the formats were written against, and its tools,
# kept in the repository so the tests run from any clone.
SHARED = Path(__file__).parent / "data"
TOOL_DEFS: list[dict[str, Any]] = json.loads((SHARED / "tools.json").read_text())
SCHEMAS: dict[str, dict[str, Any]] = {
    t["function"]["name"]: t["function"]["parameters"] for t in TOOL_DEFS
}


def offered(names: list[str]) -> dict[str, dict[str, Any]]:
    return {name: SCHEMAS[name] for name in names}


def squash(text: str | None) -> str | None:
    if text is None:
        return None
    return re.sub(r"\s+", " ", text).strip() or None


def check_case(fmt: TextFormat, case: dict[str, Any]) -> None:
    result = fmt.parse(case["content"], offered(case["tools"]))
    got = [{"name": c.name, "arguments": c.arguments} for c in result.calls]
    assert got == case["expect_calls"], case["id"]
    assert squash(result.text) == squash(case["expect_text"]), case["id"]


ANY_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=10)
"""Any text at all: for formats whose argument values are JSON-escaped."""


def parse_with(
    fmt: TextFormat, text: str, tools: dict[str, Any] | None = None
) -> tuple[tuple[ParsedCall, ...], str | None]:
    """The calls fmt recovers from text (all sample tools offered unless told) and the rest."""
    result = fmt.parse(text, SCHEMAS if tools is None else tools)
    return result.calls, result.text


def simple_calls(text: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[list[ParsedCall]]:
    """Calls to the sample tools with arguments that fit their schemas."""
    words = (
        text
        if text is not None
        else st.text(alphabet="abcxyz XYZ019.,:;-_/()'\"", min_size=0, max_size=12)
    )

    def value(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
        kind = schema.get("type")
        if kind == "integer":
            return st.integers(min_value=-(10**6), max_value=10**6)
        if kind == "number":
            return st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
        if kind == "boolean":
            return st.booleans()
        if kind == "array":
            return st.lists(words, max_size=3)
        if kind == "object":
            return st.fixed_dictionaries({"name": words}, optional={"email": words})
        return words

    def call(name: str) -> st.SearchStrategy[ParsedCall]:
        props = SCHEMAS[name]["properties"]
        required = set(SCHEMAS[name].get("required", []))
        args = st.fixed_dictionaries(
            {k: value(v) for k, v in props.items() if k in required},
            optional={k: value(v) for k, v in props.items() if k not in required},
        )
        return args.map(lambda a: ParsedCall(name, a))

    return st.lists(st.sampled_from(sorted(SCHEMAS)).flatmap(call), min_size=1, max_size=3)


def assert_round_trip(fmt: TextFormat, calls: list[ParsedCall]) -> None:
    result: ParseResult = fmt.parse(fmt.render_calls(calls), SCHEMAS)
    assert list(result.calls) == calls
    assert result.text is None


CHUNK_SIZES = (1, 2, 3, 5, 7, 11, 23)
"""Small and odd delta sizes: markers and values split at every kind of place."""


def stream_in(
    text: str, tools: dict[str, Any], size: int, preferred: str | None = None
) -> tuple[tuple[ParsedCall, ...], str]:
    """The calls and the content StreamRecovery gives for text fed in deltas of size."""
    from proxy.formats.stream import StreamRecovery

    parser = StreamRecovery(tools, preferred, keep_reasoning=True)
    out = [item for start in range(0, len(text), size) for item in
           parser.feed(text[start : start + size])]
    out += parser.flush()
    calls = tuple(item for item in out if isinstance(item, ParsedCall))
    return calls, "".join(item for item in out if isinstance(item, str))
