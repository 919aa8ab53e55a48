from __future__ import annotations

import pytest
from sample_corpus import (
    SCHEMAS,
)

from proxy.formats.base import ParsedCall
from proxy.formats.deepseek_v3 import FORMAT

_V3 = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```<｜tool▁call▁end｜>"


def test_two_calls_prose_missing_calls_end_and_eos() -> None:
    text = (
        "Let me look.<｜tool▁calls▁begin｜>"
        + _V3.format(name="read_file", args='{"path": "a"}')
        + "\n"
        + _V3.format(name="bash", args='{\n  "command": "ls",\n  "timeout": 5,\n}')
        + "<｜end▁of▁sentence｜>"
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (
        ParsedCall("read_file", {"path": "a"}),
        ParsedCall("bash", {"command": "ls", "timeout": 5}),
    )
    assert result.text == "Let me look."


@pytest.mark.parametrize(
    "opener",
    [
        "<｜tool_calls_begin｜>",
        "<｜tool calls begin｜>",
        "<｜tool\\_calls\\_begin｜>",
        "<｜tool▁calls｜>",
    ],
)
def test_misspelled_openers(opener: str) -> None:
    text = opener + _V3.format(name="read_file", args='{"path": "a"}') + "<｜tool▁calls▁end｜>"
    assert FORMAT.parse(text, SCHEMAS).calls == (ParsedCall("read_file", {"path": "a"}),)


def test_unknown_mixed_and_truncated() -> None:
    unknown = _V3.format(name="book_flight", args='{"to": "JFK"}')
    only = f"<｜tool▁calls▁begin｜>{unknown}<｜tool▁calls▁end｜>"
    assert (FORMAT.parse(only, SCHEMAS).calls, FORMAT.parse(only, SCHEMAS).text) == ((), only)
    mixed = FORMAT.parse(
        f"<｜tool▁calls▁begin｜>{unknown}\n" + _V3.format(name="read_file", args='{"path": "b"}'),
        SCHEMAS,
    )
    assert mixed.calls == (ParsedCall("read_file", {"path": "b"}),)
    # Only the offered call is taken out: the unknown one stays as written,
    # behind the section opener it was written after.
    assert mixed.text == "<｜tool▁calls▁begin｜>" + unknown
    cut = '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{"command": "rm'
    assert (FORMAT.parse(cut, SCHEMAS).calls, FORMAT.parse(cut, SCHEMAS).text) == ((), cut)
