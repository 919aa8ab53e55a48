from __future__ import annotations

from typing import Any

import pytest
from sample_corpus import (
    SCHEMAS,
)

from proxy.formats.base import ParsedCall
from proxy.formats.qwen3_coder_xml import FORMAT


def _call(name: str, params: str, close: str = "</function>\n</tool_call>") -> str:
    return f"<tool_call>\n<function={name}>\n{params}{close}"


def test_values_keep_inner_newlines_and_markup() -> None:
    body = '<parameter=path>\na.py\n</parameter>\n<parameter=content>\n\nif a < b && c > "d":\n    pass\n\n</parameter>\n'
    result = FORMAT.parse(_call("write_file", body), SCHEMAS)
    assert result.calls == (
        ParsedCall("write_file", {"path": "a.py", "content": '\nif a < b && c > "d":\n    pass\n'}),
    )


def test_literal_close_tag_inside_value_is_data() -> None:
    body = "<parameter=command>\necho '</parameter>' done\n</parameter>\n"
    result = FORMAT.parse(_call("bash", body), SCHEMAS)
    assert result.calls == (ParsedCall("bash", {"command": "echo '</parameter>' done"}),)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("7", 7), (" 12 ", 12), ("seven", "seven"), ("null", None), ("None", None), ("3.5", "3.5")],
)
def test_integer_values(raw: str, expected: Any) -> None:
    body = f"<parameter=command>\nls\n</parameter>\n<parameter=timeout>\n{raw}\n</parameter>\n"
    result = FORMAT.parse(_call("bash", body), SCHEMAS)
    assert result.calls[0].arguments["timeout"] == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("TRUE", True), ("False", False), ("yes", "yes")],
)
def test_boolean_values_case_insensitive(raw: str, expected: Any) -> None:
    body = f"<parameter=path>\n.\n</parameter>\n<parameter=recursive>\n{raw}\n</parameter>\n"
    result = FORMAT.parse(_call("list_directory", body), SCHEMAS)
    assert result.calls[0].arguments["recursive"] == expected


def test_python_literal_array_and_numeric_string() -> None:
    body = (
        "<parameter=title>\n42\n</parameter>\n<parameter=labels>\n['a', 'b',]\n</parameter>\n"
        "<parameter=assignee>\n{'name': 'Al', 'email': None}\n</parameter>\n"
    )
    result = FORMAT.parse(_call("create_issue", body), SCHEMAS)
    assert result.calls[0].arguments == {
        "title": "42",
        "labels": ["a", "b"],
        "assignee": {"name": "Al", "email": None},
    }


def test_unknown_tool_stays_verbatim_in_place() -> None:
    unknown = _call("book_flight", "<parameter=to>\nJFK\n</parameter>\n")
    known = _call("read_file", "<parameter=path>\nx\n</parameter>\n")
    text = f"Before.\n{unknown}\n{known}\nAfter."
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("read_file", {"path": "x"}),)
    assert result.text == f"Before.\n{unknown}\n\nAfter."


def test_truncated_call_stays_text() -> None:
    for text in (
        "<tool_call>\n<function=bash>\n<parameter=command>\nrm -rf bu",
        "<tool_call>\n<function=bash>\n<parameter=command>\nls\n</parameter>\n",
        "<tool_call>\n<function=ba",
    ):
        result = FORMAT.parse(text, SCHEMAS)
        assert result.calls == ()
        assert result.text == text


def test_orphan_function_after_prose() -> None:
    text = "I will read it.\n<function=read_file>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>"
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("read_file", {"path": "a"}),)
    assert result.text == "I will read it.\n"


def test_markup_in_answer_fence_is_not_a_call() -> None:
    text = (
        "Write it like this:\n\n```xml\n"
        + _call("read_file", "<parameter=path>\na\n</parameter>\n")
        + "\n```\nDone."
    )
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == ()
    assert result.text == text


def test_seed_oss_wrapper_and_prose_after() -> None:
    text = "<seed:tool_call>\n<function=read_file>\n<parameter=path>\nb\n</parameter>\n</function>\n</seed:tool_call>\nok"
    result = FORMAT.parse(text, SCHEMAS)
    assert result.calls == (ParsedCall("read_file", {"path": "b"}),)
    assert result.text is not None and result.text.strip() == "ok"


def test_last_parameter_close_missing_before_function_close() -> None:
    text = "<tool_call>\n<function=read_file>\n<parameter=path>\na.txt\n</function>\n</tool_call>"
    assert FORMAT.parse(text, SCHEMAS).calls == (ParsedCall("read_file", {"path": "a.txt"}),)
