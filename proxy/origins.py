"""Who may act through a browser: the Host and Origin rules the edge applies (docs/security.md).

Pure: header values in, a verdict out; no settings, no I/O. The edge (middleware/edge.py)
collects the headers in its one pass and calls these only when they matter.

Two attacks shape it. A page on another site can POST to toolshim (a form or a
`text/plain` fetch needs no preflight, and the body is still read as JSON): its
request carries an `Origin` that is not ours, or `Sec-Fetch-Site: cross-site`. A
page whose DNS name is rebound to 127.0.0.1 becomes same-origin with toolshim and can
read what it answers: its requests carry that name as `Host`, which a proxy listening
on loopback never has a reason to accept.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.errors import error_body

LOOPBACK_NAMES = frozenset({b"localhost", b"127.0.0.1", b"[::1]"})
"""the Host names (any port) a loopback listener always answers."""
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""methods that neither change state nor run a model; all others need a same-origin caller."""


def on_loopback(server: Any) -> bool:
    """Whether the connection arrived on a loopback address (ASGI `scope["server"]`)."""
    if not server:
        return False
    address = str(server[0])
    return address.startswith(("127.", "::ffff:127.")) or address == "::1"


def host_name(host: bytes) -> bytes:
    """`Host` without its port, lower-cased: `[::1]:8080` -> `[::1]`, `Foo:1` -> `foo`."""
    if host.startswith(b"["):
        return host[:host.find(b"]") + 1].lower()
    return host.partition(b":")[0].lower()


def host_allowed(host: bytes, extra: frozenset[bytes]) -> bool:
    """A loopback listener's Host check: the loopback names, or one `--allowed-hosts` lists."""
    name = host_name(host)
    return name in LOOPBACK_NAMES or name in extra


def same_origin(origin: bytes, scheme: str, host: bytes | None) -> bool:
    """Whether `Origin` is this proxy's own: its scheme, and the host and port the request
    was sent to (`Host`). `null` (sandboxed frames, files) is never ours.

    An `https` origin for a plain-HTTP request is ours too when host and port agree: TLS
    ends in front of toolshim (a reverse proxy) and proxy headers are not read. No other
    page can have that origin: its browser would speak TLS to the address Host names."""
    if host is None:
        return False
    given_scheme, sep, authority = origin.lower().partition(b"://")
    if not sep or given_scheme not in (scheme.encode(), b"https"):
        return False
    return _port_default(authority, given_scheme) == _port_default(host.lower(), given_scheme)


def _port_default(authority: bytes, scheme: bytes) -> bytes:
    """`x:80` for http and `x:443` for https as a browser writes them: `x`."""
    default = b":443" if scheme == b"https" else b":80"
    return authority.removesuffix(default)


def refusal_body(path: str, status: int, message: str, code: str) -> bytes:
    """An error in the envelope of the dialect `path` belongs to: Anthropic's for
    /v1/messages, Google's for /v1beta, OpenAI's for everything else (the SDKs of each
    raise their own exception types only from their own shapes)."""
    if path.startswith("/v1/messages"):
        kind = {401: "authentication_error", 403: "permission_error"}.get(
            status, "invalid_request_error")
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    if path.startswith("/v1beta"):
        state = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED"}.get(
            status, "FAILED_PRECONDITION")
        return orjson.dumps({"error": {"code": status, "message": message, "status": state}})
    openai_type = "invalid_request_error" if status == 421 else None
    return orjson.dumps(error_body(message, status, type_=openai_type, code=code))


def cross_origin(method: str, scheme: str, origin: bytes | None, fetch_site: bytes | None,
                 host: bytes | None) -> bool:
    """A request that acts, sent by a page of another origin (a browser says so)."""
    if method in SAFE_METHODS:
        return False
    if fetch_site == b"cross-site":
        return True
    return origin is not None and not same_origin(origin, scheme, host)
