from __future__ import annotations

import pytest

from proxy.backends.error_text import client_message

TRACE = ("7 validation errors:\n  {'type': 'literal_error'}\n\n  File "
         "\"<site-packages>/llama_cpp/server/app.py\", line 376, in create_chat_completion\n"
         "    POST /v1/chat/completions")
PY_TRACE = ("Traceback (most recent call last):\n  File \"/srv/app/main.py\", line 3, in f\n"
            "ValueError: boom")


def test_traceback_reduced_to_first_line_and_status() -> None:
    assert client_message(500, TRACE) == "7 validation errors: (upstream HTTP 500)"
    assert client_message(502, PY_TRACE) == "ValueError: boom (upstream HTTP 502)"


@pytest.mark.parametrize("message", [
    "Tool with name 'nope' not found in tools", "", "model is loading, try again"])
def test_plain_messages_pass_unchanged(message: str) -> None:
    assert client_message(500, message) == message


def test_client_errors_keep_their_text() -> None:
    assert client_message(400, TRACE) == TRACE


def test_full_text_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("DEBUG", logger="toolshim"):
        client_message(500, TRACE)
    assert any("app.py" in r.getMessage() for r in caplog.records)
