from __future__ import annotations

from sample_corpus import (
    SCHEMAS,
)

from proxy.formats.base import ParsedCall
from proxy.formats.minimax_m2 import FORMAT


def _invoke(name: str, params: dict[str, str]) -> str:
    body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in params.items())
    return f'<invoke name="{name}">\n{body}</invoke>\n'


def test_two_invokes_with_typed_values() -> None:
    text = (
        "Checking.\n<minimax:tool_call>\n"
        + _invoke("bash", {"command": "ls -la", "timeout": "30"})
        + _invoke("list_directory", {"path": "/tmp", "recursive": "False"})
        + "</minimax:tool_call>"
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (
        ParsedCall("bash", {"command": "ls -la", "timeout": 30}),
        ParsedCall("list_directory", {"path": "/tmp", "recursive": False}),
    )
    assert result.text == "Checking.\n"


def test_mixed_section_keeps_unknown_invoke() -> None:
    unknown = _invoke("book_flight", {"to": "JFK"})
    text = (
        "<minimax:tool_call>\n"
        + unknown
        + _invoke("read_file", {"path": "a"})
        + "</minimax:tool_call>"
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("read_file", {"path": "a"}),)
    # Only the offered invoke is taken out; the unknown one stays as written, in its section.
    assert result.text == "<minimax:tool_call>\n" + unknown + "</minimax:tool_call>"


def test_only_unknown_stays_verbatim() -> None:
    text = "<minimax:tool_call>\n" + _invoke("book_flight", {"to": "JFK"}) + "</minimax:tool_call>"
    assert FORMAT.parse(text, SCHEMAS).text == text


def test_truncated_stays_text_and_missing_section_close_is_fine() -> None:
    cut = '<minimax:tool_call>\n<invoke name="bash">\n<parameter name="command">rm -r'
    assert (FORMAT.parse(cut, SCHEMAS).calls, FORMAT.parse(cut, SCHEMAS).text) == ((), cut)
    unclosed = "<minimax:tool_call>\n" + _invoke("read_file", {"path": "a"})
    assert FORMAT.parse(unclosed, SCHEMAS).calls == (ParsedCall("read_file", {"path": "a"}),)
