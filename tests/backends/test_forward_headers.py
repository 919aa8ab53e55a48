"""Which client headers go upstream: end-to-end ones only, auth by the rules."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import Headers

from proxy.backends.upstream import HOP_BY_HOP, Upstream, forward_headers


@pytest.fixture
def plain() -> Upstream:
    return Upstream("http://127.0.0.1:11434", httpx.AsyncClient())


def _headers(pairs: list[tuple[str, str]]) -> Headers:
    return Headers(raw=[(k.lower().encode(), v.encode()) for k, v in pairs])


def test_hop_by_hop_and_connection_named_headers_stay_behind(plain: Upstream) -> None:
    incoming = _headers([("host", "proxy:8080"), ("connection", "keep-alive, X-Trace"),
                         ("x-trace", "1"), ("transfer-encoding", "chunked"),
                         ("content-length", "12"), ("x-keep", "yes"), ("accept", "*/*")])
    assert forward_headers(incoming, plain, keep_client_auth=True) == {
        "x-keep": "yes", "accept": "*/*"}


def test_client_auth_goes_on_only_when_allowed(plain: Upstream) -> None:
    incoming = _headers([("authorization", "Bearer client"), ("x-a", "1")])
    assert forward_headers(incoming, plain, keep_client_auth=True) == {
        "x-a": "1", "authorization": "Bearer client"}
    assert forward_headers(incoming, plain, keep_client_auth=False) == {"x-a": "1"}


def test_the_upstream_key_replaces_the_clients() -> None:
    keyed = Upstream("http://h:1", httpx.AsyncClient(), api_key="sk-upstream-123456")
    incoming = _headers([("authorization", "Bearer client")])
    assert forward_headers(incoming, keyed, keep_client_auth=True) == {
        "authorization": "Bearer sk-upstream-123456"}


_NAMES = st.sampled_from(sorted(HOP_BY_HOP | {"authorization", "x-a", "x-b", "accept"}))


@given(st.lists(st.tuples(_NAMES, st.sampled_from(["1", "x-a", "x-b, accept", "keep-alive"])),
                max_size=8), st.booleans())
def test_same_as_the_rule_read_literally(pairs: list[tuple[str, str]], keep: bool) -> None:
    upstream = Upstream("http://h:1", httpx.AsyncClient())
    incoming = _headers(pairs)
    named = {h.strip() for k, v in pairs if k == "connection" for h in v.split(",")}
    expected = {k: v for k, v in incoming.items()
                if k not in HOP_BY_HOP and k not in named and k != "authorization"}
    auth = [v for k, v in incoming.items() if k == "authorization"]
    if keep and auth:
        expected["authorization"] = auth[0]
    assert forward_headers(incoming, upstream, keep_client_auth=keep) == expected
