"""Jamba and Nemotron Nano v2: one WrappedJson format each, differing only in their tags."""

from __future__ import annotations

import pytest
from sample_corpus import parse_with

from proxy.formats import jamba, nemotron_v2
from proxy.formats.base import ParsedCall, TextFormat

TAGGED = [
    pytest.param(jamba.FORMAT, ("<tool_calls>", "</tool_calls>"), id="jamba"),
    pytest.param(nemotron_v2.FORMAT, ("<TOOLCALL>", "</TOOLCALL>"), id="nemotron_v2"),
]


@pytest.mark.parametrize(("fmt", "tags"), TAGGED)
def test_calls_with_prose_around(fmt: TextFormat, tags: tuple[str, str]) -> None:
    calls, rest = parse_with(
        fmt,
        f'Checking.\n{tags[0]}[{{"name": "read_file", "arguments": {{"path": "a"}}}}, '
        f'{{"name": "bash", "arguments": {{"command": "ls"}}}}]{tags[1]}\nDone.',
    )
    assert calls == (ParsedCall("read_file", {"path": "a"}), ParsedCall("bash", {"command": "ls"}))
    assert rest is not None and rest.split() == ["Checking.", "Done."]


@pytest.mark.parametrize(("fmt", "tags"), TAGGED)
@pytest.mark.parametrize(
    "body",
    ['[{"name": "book", "arguments": {}}]CLOSE', '[{"name": "bash", "arguments": {"command": "ls'],
)
def test_unknown_tool_and_truncated_stay_text(
    fmt: TextFormat, tags: tuple[str, str], body: str
) -> None:
    text = tags[0] + body.replace("CLOSE", tags[1])
    assert parse_with(fmt, text) == ((), text)


@pytest.mark.parametrize(("fmt", "tags"), TAGGED)
def test_prompt_and_rendering_use_the_format_tags(fmt: TextFormat, tags: tuple[str, str]) -> None:
    assert fmt.markers == (tags[0],)
    assert fmt.render_calls([ParsedCall("bash", {"command": "ls"})]) == (
        f'{tags[0]}[{{"name":"bash","arguments":{{"command":"ls"}}}}]{tags[1]}'
    )
    assert f"reply with {tags[0]}," in fmt.render_tools([]) and f"then {tags[1]}," in (
        fmt.render_tools([])
    )
