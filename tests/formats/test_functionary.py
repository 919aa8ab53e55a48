from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import parse_with

from proxy.formats.base import ParsedCall
from proxy.formats.functionary import FORMAT

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
