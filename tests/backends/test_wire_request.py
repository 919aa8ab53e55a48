"""The bytes of one upstream request (backends/wire_request.py)."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.backends.wire_request import as_bytes, encode_request

URL = httpx.URL("http://backend:8000/v1/chat/completions?x=1")


def test_host_and_length_come_from_the_url_and_body_not_the_caller() -> None:
    given_headers = [(b"Host", b"evil"), (b"Content-Length", b"999"),
                     (b"Transfer-Encoding", b"chunked"), (b"accept", b"*/*")]
    assert encode_request("POST", URL, given_headers, b"{}") == (
        b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: backend:8000\r\n"
        b"accept: */*\r\ncontent-length: 2\r\n\r\n{}")


def test_a_get_without_body_says_no_length() -> None:
    assert encode_request("GET", URL, [], None) == (
        b"GET /v1/chat/completions?x=1 HTTP/1.1\r\nhost: backend:8000\r\n\r\n")


@given(st.sampled_from(["\r", "\n", "\r\n"]), st.booleans())
def test_a_line_break_in_a_header_name_or_value_is_refused(brk: str, in_name: bool) -> None:
    headers = {f"x{brk}y" if in_name else "x": "v" if in_name else f"a{brk}b"}
    with pytest.raises(httpx.LocalProtocolError):
        encode_request("POST", URL, as_bytes(headers), b"{}")


def test_what_latin_1_cannot_say_goes_as_utf_8() -> None:
    assert list(as_bytes({"x-name": "Zoë", "x-emoji": "☃"})) == [
        (b"x-name", "Zoë".encode("latin-1")), (b"x-emoji", "☃".encode())]
