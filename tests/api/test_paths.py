"""passthrough_path: only what stays under /v1/ after normalising is forwarded."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.api.paths import passthrough_path


@pytest.mark.parametrize(("raw", "expected"), [
    (b"/v1/embeddings", "/v1/embeddings"),
    (b"//v1//embeddings", "/v1/embeddings"),
    (b"/v1/./x/../embeddings", "/v1/embeddings"),
    (b"/v1/a%20b", "/v1/a%20b"),
    (b"/v1/x/", "/v1/x/"),
    (b"/v1/../api/delete", None),
    (b"/v1/%2e%2e/api/pull", None),
    (b"/v1/%2E%2E%2Fapi/pull", None),
    (b"/v1\\..\\api\\delete", None),
    (b"/v1/%252e%252e/api", None),
    (b"/v1/..", None),
    (b"/v1/", None),
    (b"/api/tags", None),
    (b"/v1/%ff", None),
])
def test_examples(raw: bytes, expected: str | None) -> None:
    assert passthrough_path(raw) == expected


_pieces = st.sampled_from(["v1", "..", ".", "", "%2e", "%2E%2e", "%2f", "%5c", "\\", "api",
                           "delete", "%25", "x", "%2e.", "embeddings"])


@given(st.lists(_pieces, max_size=8).map(lambda parts: "/".join(parts)))
def test_whatever_comes_in_what_goes_out_is_under_v1_and_has_no_dot_segments(raw: str) -> None:
    out = passthrough_path(raw.encode())
    if out is None:
        return
    decoded = unquote(out)
    assert decoded.startswith("/v1/")
    assert ".." not in decoded.split("/") and "." not in decoded.split("/")
    assert "\\" not in decoded and "//" not in decoded
    assert passthrough_path(out.encode()) == out  # a fixed point: nothing left to decode
