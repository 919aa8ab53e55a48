from __future__ import annotations

import itertools
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sample_corpus import SCHEMAS, parse_with, squash

from proxy.formats import recover
from proxy.formats.base import ParsedCall
from proxy.formats.functionary import FORMAT
from proxy.formats.stream import StreamRecovery

_parse = partial(parse_with, FORMAT)


def test_v31_both_spellings_missing_close_and_prose() -> None:
    text = (
        'Reading both.\n<function=read_file>{"path": "a"}</function>'
        '<function name="read_file">{"path": "b"}'
    )
    calls, rest = _parse(text)
    assert [c.arguments["path"] for c in calls] == ["a", "b"]
    assert rest == "Reading both.\n"


def test_v32_reply_starting_with_name_and_more_items() -> None:
    text = 'read_file\n{"path": "a"}>>>all\nDone soon.>>>bash\n{"command": "ls"}'
    calls, rest = _parse(text)
    assert calls == (ParsedCall("read_file", {"path": "a"}), ParsedCall("bash", {"command": "ls"}))
    assert rest == "Done soon."


def test_python_tag_code_only_for_offered_python() -> None:
    text = "<|python_tag|>print(1 + 1)<|eom_id|>"
    assert _parse(text) == ((), text)
    assert _parse(text, {"python": {"type": "object"}}) == (
        (ParsedCall("python", {"code": "print(1 + 1)"}),),
        None,
    )


@pytest.mark.parametrize(
    "text",
    [
        '<function=book_flight>{"to": "JFK"}</function>',
        '<function=read_file>{"path": "a',
        "<function=read_file>\n<parameter=path>\na\n</parameter>\n</function>",
        "Hello\nworld, how are you?",
        ">>>book_flight\n{}",
    ],
)
def test_unknown_truncated_other_formats_and_prose_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)


# v3.2 answers start right after the prompt's `>>>`: a call can be the first thing.
V32_STARTS = [
    'get_weather\n{"city": "A"}',
    'get_weather\n{"city": "A"}\n>>>read_file\n{"path": "b"}',
    'get_weather\n{"city": "A"}\nDone.',
    ' get_weather \n\n  {"city": "A"}',
    'all\nLet me look.>>>get_weather\n{"city": "A"}',
    # Not calls: a name line followed by prose, an unknown name, plain prose.
    "get_weather\nis the tool I would use.",
    'book_flight\n{"to": "JFK"}',
    'Hello\n{"city": "A"}',
]


@settings(max_examples=200, deadline=None)
@given(text=st.sampled_from(V32_STARTS), cuts=st.lists(st.integers(0, 60), max_size=6),
       preferred=st.sampled_from([None, "functionary"]))
def test_a_v32_call_at_the_start_streams_as_the_whole_text_gives(
    text: str, cuts: list[int], preferred: str | None
) -> None:
    tools = {name: SCHEMAS[name] for name in ("get_weather", "read_file")}
    whole, _ = recover(text, tools, preferred)
    parser = StreamRecovery(tools, preferred, keep_reasoning=True)
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    items = [item for a, b in itertools.pairwise(bounds) for item in parser.feed(text[a:b])]
    items += parser.flush()
    assert [i for i in items if isinstance(i, ParsedCall)] == list(whole.calls)
    assert squash("".join(i for i in items if isinstance(i, str))) == squash(whole.text)


def test_whole_v32_starts_are_calls() -> None:
    tools = {name: SCHEMAS[name] for name in ("get_weather", "read_file")}
    weather, path = ParsedCall("get_weather", {"city": "A"}), ParsedCall("read_file", {"path": "b"})
    assert recover(V32_STARTS[0], tools)[0].calls == (weather,)
    assert recover(V32_STARTS[1], tools)[0].calls == (weather, path)


def test_only_a_first_line_that_may_be_an_offered_name_is_held() -> None:
    parser = StreamRecovery({"get_weather": SCHEMAS["get_weather"]}, keep_reasoning=True)
    assert parser.feed("Hello") == ["Hello"]
    parser = StreamRecovery({"get_weather": SCHEMAS["get_weather"]}, keep_reasoning=True)
    assert parser.feed("get") == []
    assert parser.feed("_weather\n") == []
    assert parser.feed("is a tool.") == ["get_weather\nis a tool."]
    parser = StreamRecovery({"get_weather": SCHEMAS["get_weather"]}, keep_reasoning=True)
    assert parser.feed("get_weathe") == []
    assert parser.feed("r2 is") == ["get_weather2 is"]
