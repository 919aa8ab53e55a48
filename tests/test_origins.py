"""The Host and Origin rules as plain functions (proxy/origins.py)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.origins import host_allowed, host_name, on_loopback, refusal_body, same_origin

NAMES = st.from_regex(r"[a-z0-9][a-z0-9.-]{0,30}", fullmatch=True)
PORTS = st.integers(1, 65535)


@pytest.mark.parametrize(("server", "loopback"), [
    (("127.0.0.1", 8080), True), (("127.3.2.1", 1), True), (("::1", 8080), True),
    (("::ffff:127.0.0.1", 80), True), (("10.0.0.5", 8080), False), (("0.0.0.0", 1), False),
    (("toolshim", 80), False), (None, False), (("/run/toolshim.sock", None), False),
])
def test_on_loopback(server: object, loopback: bool) -> None:
    assert on_loopback(server) is loopback


@given(NAMES, PORTS)
def test_a_port_never_changes_the_name(name: str, port: int) -> None:
    assert host_name(f"{name}:{port}".encode()) == name.encode()
    assert host_name(f"[{name}]:{port}".encode()) == f"[{name}]".encode()


@given(NAMES, PORTS)
def test_only_listed_names_pass(name: str, port: int) -> None:
    host = f"{name}:{port}".encode()
    loopback = name in ("localhost", "127.0.0.1")
    assert host_allowed(host, frozenset()) is loopback
    assert host_allowed(host, frozenset({name.encode()}))


@given(st.sampled_from(["http", "https"]), NAMES, PORTS)
def test_the_own_origin_is_same_origin(scheme: str, name: str, port: int) -> None:
    host = f"{name}:{port}".encode()
    assert same_origin(f"{scheme}://{name}:{port}".encode(), scheme, host)
    assert same_origin(f"{scheme.upper()}://{name.upper()}:{port}".encode(), scheme, host)
    assert not same_origin(f"{scheme}://{name}:{port}".encode(), scheme, None)
    assert not same_origin(f"{scheme}://{name}x:{port}".encode(), scheme, host)
    assert not same_origin(f"{scheme}://{name}:{port % 65535 + 1}".encode(), scheme, host)


@pytest.mark.parametrize(("origin", "scheme", "host", "same"), [
    (b"http://localhost", "http", b"localhost:80", True),
    (b"https://proxy.example", "http", b"proxy.example", True),  # TLS ends in front
    (b"https://proxy.example", "http", b"proxy.example:443", True),
    (b"http://proxy.example", "https", b"proxy.example", False),  # a downgrade is not ours
    (b"null", "http", b"localhost:8080", False),
    (b"file://", "http", b"localhost:8080", False),
    (b"chrome-extension://abc", "http", b"abc", False),
    (b"http://localhost:8080.evil", "http", b"localhost:8080", False),
])
def test_same_origin_cases(origin: bytes, scheme: str, host: bytes, same: bool) -> None:
    assert same_origin(origin, scheme, host) is same


def test_each_dialect_gets_its_own_envelope() -> None:
    anthropic = orjson.loads(refusal_body("/v1/messages", 403, "no", "cross_origin"))
    assert anthropic == {"type": "error", "error": {"type": "permission_error", "message": "no"}}
    google = orjson.loads(refusal_body("/v1beta/models/m:generateContent", 403, "no", "x"))
    assert google == {"error": {"code": 403, "message": "no", "status": "PERMISSION_DENIED"}}
    openai = orjson.loads(refusal_body("/admin/validate", 421, "no", "host_not_allowed"))
    assert openai == {"error": {"message": "no", "type": "invalid_request_error", "param": None,
                                "code": "host_not_allowed"}}
