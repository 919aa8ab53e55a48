from __future__ import annotations

from functools import partial

import pytest
from sample_corpus import parse_with

from proxy.formats.base import ParsedCall
from proxy.formats.deepseek_v32 import FORMAT

_parse = partial(parse_with, FORMAT)


def _param(key: str, value: str, string: str) -> str:
    return f'<｜DSML｜parameter name="{key}" string="{string}">{value}</｜DSML｜parameter>\n'


def _invoke(name: str, params: str) -> str:
    return f'<｜DSML｜invoke name="{name}">\n{params}</｜DSML｜invoke>\n'


def test_string_and_json_values_with_prose() -> None:
    text = (
        "Checking.\n<｜DSML｜function_calls>\n"
        + _invoke(
            "bash",
            _param("command", "echo '</｜DSML｜parameter>' 7", "true")
            + _param("timeout", "30", "false"),
        )
        + _invoke(
            "create_issue", _param("title", "42", "true") + _param("labels", '["a", "b"]', "false")
        )
        + "</｜DSML｜function_calls><｜end▁of▁sentence｜>"
    )
    calls, rest = _parse(text)
    assert calls == (
        ParsedCall("bash", {"command": "echo '</｜DSML｜parameter>' 7", "timeout": 30}),
        ParsedCall("create_issue", {"title": "42", "labels": ["a", "b"]}),
    )
    assert rest is not None and rest.strip() == "Checking."


@pytest.mark.parametrize(
    "text",
    [
        "<｜DSML｜function_calls>\n"
        + _invoke("book", _param("to", "JFK", "true"))
        + "</｜DSML｜function_calls>",
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="bash">\n<｜DSML｜parameter name="command" string="true">rm -',
        "<｜DSML｜function_calls>\n" + _invoke("read_file", _param("path", "a", "true"))[:-20],
    ],
)
def test_unknown_and_truncated_stay_text(text: str) -> None:
    assert _parse(text) == ((), text)
