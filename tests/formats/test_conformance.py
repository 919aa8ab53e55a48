"""The shared conformance suite for every registered text tool-call format.

The sample corpus goes through `recover` whole and through `StreamRecovery`
at every split point (random splits for long texts); every format must
round-trip its own rendering and list every tool in its prompt.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sample_corpus import (
    ANY_TEXT,
    SCHEMAS,
    SHARED,
    TOOL_DEFS,
    assert_round_trip,
    check_case,
    offered,
    simple_calls,
    squash,
)

from proxy.formats import FORMATS, format_order, get_format, recover
from proxy.formats.base import ParsedCall
from proxy.formats.detect import REASONING_TAGS
from proxy.formats.stream import StreamRecovery

# The shared sample plus our own cases (faults found in real outputs).
# Every corpus file: textcalls-2026b.jsonl holds cases taken from the parser tests of
# vLLM and SGLang for the 2026 families (each case's notes name the test).
ALL_CASES: list[dict[str, Any]] = [
    json.loads(line)
    for corpus in sorted(SHARED.glob("textcalls-*.jsonl"))
    for line in corpus.read_text().splitlines()
    if line
]
# The corpus labels a few cases by family; the registry by module.
CASES = [c for c in ALL_CASES if c["format"] in FORMATS or c["format"] == "plain"]
NEGATIVES = [c for c in CASES if not c["expect_calls"]]
# Reasoning (any family's markers) is removed by recover, not by the format: those
# cases go through recover only.
OWN_FORMAT_CASES = [c for c in CASES if c["format"] in FORMATS
                    and not any(tag in c["content"] for tag in REASONING_TAGS)]
# Values are raw text in the markup, typed by the schema: a value cannot hold
# its own closing markup and edge whitespace belongs to the markup.
RAW_TEXT_VALUES = {"deepseek_v32", "glm45", "minimax_m2", "qwen3_coder_xml",
                   # The 2026 families.
                   "seed_oss", "step3",
                   "deepseek_v4", "kimi_k3", "minicpm5", "minimax_m3", "solar_open2"}


def _calls(calls: Any) -> list[dict[str, Any]]:
    return [{"name": c.name, "arguments": c.arguments} for c in calls]


def _stream(
    text: str, tools: dict[str, Any], cuts: list[int], keep: bool = True
) -> tuple[list[ParsedCall], str]:
    parser = StreamRecovery(tools, keep_reasoning=keep)
    out: list[str | ParsedCall] = []
    bounds = [0, *sorted(set(cuts)), len(text)]
    for start, end in itertools.pairwise(bounds):
        out += parser.feed(text[start:end])
    out += parser.flush()
    calls = [item for item in out if isinstance(item, ParsedCall)]
    return calls, "".join(item for item in out if isinstance(item, str))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_whole_text(case: dict[str, Any]) -> None:
    result, name = recover(case["content"], offered(case["tools"]))
    assert _calls(result.calls) == case["expect_calls"]
    assert squash(result.text) == squash(case["expect_text"])
    assert (name is None) == (not case["expect_calls"])


@pytest.mark.parametrize("case", OWN_FORMAT_CASES, ids=lambda c: c["id"])
def test_sample_parsed_by_its_own_format(case: dict[str, Any]) -> None:
    check_case(get_format(case["format"]), case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_preferred_format_gives_the_same_result(case: dict[str, Any]) -> None:
    preferred = case["format"] if case["format"] in FORMATS else None
    result, _ = recover(case["content"], offered(case["tools"]), preferred)
    assert _calls(result.calls) == case["expect_calls"]
    assert squash(result.text) == squash(case["expect_text"])


def _kept_text(case: dict[str, Any]) -> str | None:
    """The whole-text result when reasoning stays in content (the stage's setting)."""
    result, _ = recover(case["content"], offered(case["tools"]), keep_reasoning=True)
    if not any(tag in case["content"] for tag in REASONING_TAGS):
        assert squash(result.text) == squash(case["expect_text"])
    return squash(result.text)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_streamed_at_every_split_point(case: dict[str, Any]) -> None:
    text, tools, expected = case["content"], offered(case["tools"]), _kept_text(case)
    for cut in range(len(text) + 1):
        for third in ([], [cut + 7]):
            calls, streamed = _stream(text, tools, [cut, *third])
            assert _calls(calls) == case["expect_calls"], cut
            assert squash(streamed) == expected, cut


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_calls_sent_before_the_end_are_a_prefix_of_the_final_calls(case: dict[str, Any]) -> None:
    text, tools = case["content"], offered(case["tools"])
    for cut in range(len(text) + 1):
        early = [
            i
            for i in StreamRecovery(tools, keep_reasoning=True).feed(text[:cut])
            if isinstance(i, ParsedCall)
        ]
        assert _calls(early) == case["expect_calls"][: len(early)], cut


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_streamed_one_character_at_a_time(case: dict[str, Any]) -> None:
    text, tools = case["content"], offered(case["tools"])
    calls, streamed = _stream(text, tools, list(range(len(text))))
    assert _calls(calls) == case["expect_calls"]
    assert squash(streamed) == _kept_text(case)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_streamed_without_reasoning_matches_expect_text(case: dict[str, Any]) -> None:
    text, tools = case["content"], offered(case["tools"])
    for cuts in ([], list(range(0, len(text), 5))):
        calls, streamed = _stream(text, tools, cuts, keep=False)
        assert _calls(calls) == case["expect_calls"]
        assert squash(streamed) == squash(case["expect_text"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CASES), st.lists(st.floats(0, 1), max_size=8))
def test_streamed_random_splits(case: dict[str, Any], fractions: list[float]) -> None:
    text = case["content"]
    calls, streamed = _stream(text, offered(case["tools"]), [int(f * len(text)) for f in fractions])
    assert _calls(calls) == case["expect_calls"]
    assert squash(streamed) == _kept_text(case)


@pytest.mark.parametrize("case", NEGATIVES, ids=lambda c: c["id"])
def test_negative_cases_yield_no_call_at_any_prefix(case: dict[str, Any]) -> None:
    text, tools = case["content"], offered(case["tools"])
    for end in range(len(text) + 1):
        assert recover(text[:end], tools)[0].calls == ()


ROUND_TRIP_CALLS = [
    [ParsedCall("get_weather", {"city": "Oslo"})],
    [
        ParsedCall("get_weather", {"city": "Bergen", "unit": "fahrenheit"}),
        ParsedCall("read_file", {"path": "src/main.py"}),
    ],
    [
        ParsedCall(
            "create_issue",
            {
                "title": "Crash on Ärger.txt",
                "labels": ["bug", "i18n"],
                "assignee": {"name": "Dana", "email": "d@example.org"},
            },
        )
    ],
]


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("calls", ROUND_TRIP_CALLS, ids=["one", "two", "nested"])
def test_render_calls_round_trips(name: str, calls: list[ParsedCall]) -> None:
    fmt = get_format(name)
    rendered = fmt.render_calls(calls)
    result = fmt.parse(rendered, SCHEMAS)
    assert list(result.calls) == calls
    assert result.text is None
    assert _calls(recover(rendered, SCHEMAS, name)[0].calls) == _calls(calls)


@pytest.mark.parametrize("name", sorted(FORMATS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_render_calls_round_trips_any_calls(name: str, data: st.DataObject) -> None:
    calls = data.draw(simple_calls(None if name in RAW_TEXT_VALUES else ANY_TEXT))
    assert_round_trip(get_format(name), calls)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_render_tools_mentions_every_tool(name: str) -> None:
    prompt = get_format(name).render_tools(TOOL_DEFS)
    assert prompt.strip()
    for tool in SCHEMAS:
        assert tool in prompt


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_render_result_keeps_the_content(name: str) -> None:
    assert "42 degrees" in get_format(name).render_result("get_weather", "42 degrees")


def test_every_format_module_is_registered() -> None:
    from pathlib import Path

    import proxy.formats as package

    modules = {
        path.stem
        for path in Path(package.__file__).parent.glob("*.py")
        if "\nFORMAT = " in path.read_text()
    }
    assert modules <= set(FORMATS)
    assert {fmt.name for fmt in format_order(None)} == set(FORMATS)


def test_unknown_format_name_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="hermes"):
        get_format("no-such-format")


def test_preferred_format_is_tried_first() -> None:
    assert format_order("mistral")[0].name == "mistral"
    bare = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    assert recover(bare, SCHEMAS, "hermes")[1] == "hermes"
    assert recover(bare, SCHEMAS, "llama3_json")[1] == "llama3_json"


def test_specific_marker_beats_a_bare_object_inside_it() -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    result, name = recover(text, SCHEMAS, "json_block")
    assert name == "hermes" and result.text is None


def test_a_format_that_raises_costs_only_the_recovery() -> None:
    class Broken:
        name = "broken"
        markers = ("<x>",)

        def parse(self, text: str, tools: Any) -> Any:
            raise RuntimeError("bug")

    from proxy.formats.detect import recover_with

    result, name = recover_with("<x>", SCHEMAS, [Broken()])  # type: ignore[list-item]
    assert result.text == "<x>" and name is None


@pytest.mark.parametrize("name", sorted(FORMATS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_streamed_equals_whole_for_any_rendered_calls(name: str, data: st.DataObject) -> None:
    """Every format: calls as it renders them, with prose before and after, streamed
    at any splits give what the whole answer gives."""
    calls = data.draw(simple_calls(None if name in RAW_TEXT_VALUES else ANY_TEXT))
    text = "Sure, let me look.\n" + get_format(name).render_calls(calls) + "\nDone."
    whole, _ = recover(text, SCHEMAS, keep_reasoning=True)
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=8))
    streamed_calls, streamed = _stream(text, SCHEMAS, cuts)
    assert streamed_calls == list(whole.calls)
    assert squash(streamed) == squash(whole.text)
