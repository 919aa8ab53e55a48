"""Where an `http` tool may connect: the allowlist (host and port) and the one address used.

Owns: matching a URL against `allowed_hosts` (entries `host`, `host:port`,
`[v6]:port`, globs on the host), resolving the host once, refusing it when an
address is private and the entry is only a glob, and building the request to
the checked address itself, with the name kept in `Host` and in TLS's SNI and
certificate check. Connecting to the address that was checked is what stops
DNS rebinding: a second lookup at connect time could answer 127.0.0.1.
Must not: trust a URL's user info, reach a port nobody listed, or look a name
up twice for one request.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import httpx

from proxy.server_tools.local import ToolError

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int


def origin_of(url: str) -> Origin:
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower().rstrip(".")
    if scheme not in DEFAULT_PORTS or not host:
        raise ToolError("the tool may only call http(s) URLs")
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError:
        raise ToolError("the URL's port is not a number from 0 to 65535") from None
    return Origin(scheme, host, port)


def split_entry(entry: str) -> tuple[str, int | None]:
    """`host`, `host:port`, `[v6]` or `[v6]:port`; a bare v6 address has no port."""
    entry = entry.strip().lower()
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    host, sep, port = entry.rpartition(":")
    if sep and host and ":" not in host and port.isdigit():
        return host, int(port)
    return entry, None


def matching_entry(origin: Origin, allowed: list[str], home: Origin) -> str | None:
    """The host pattern of the entry that lets `origin` in, or None.

    An entry with a port allows that port. An entry without one allows the
    scheme's default port, and the port of the tool's own URL on its own host:
    a redirect to another port of an allowed host (its Redis, its admin
    listener) is refused unless someone listed it.
    """
    for entry in allowed:
        pattern, port = split_entry(entry)
        if not fnmatch.fnmatchcase(origin.host, pattern):
            continue
        if port is not None:
            if origin.port == port:
                return pattern
        elif origin.port == DEFAULT_PORTS[origin.scheme] or (
                origin.host == home.host and origin.port == home.port):
            return pattern
    return None


@dataclass(frozen=True)
class Target:
    """A checked URL and the one address to connect to for it."""

    url: str
    origin: Origin
    address: str


async def resolve_target(url: str, allowed: list[str], home: Origin) -> Target:
    """The URL checked against the allowlist and resolved once; ToolError if refused."""
    origin = origin_of(url)
    if urlsplit(url).username is not None or "@" in urlsplit(url).netloc:
        raise ToolError("the tool's URL may not carry user info (user:password@)")
    pattern = matching_entry(origin, allowed, home)
    if pattern is None:
        raise ToolError(f"host {origin.host!r} is not in the tool's allowed_hosts "
                        f"(port {origin.port})")
    addresses = await _addresses(origin.host, origin.port)
    if pattern != origin.host and not all(ipaddress.ip_address(a).is_global
                                          for a in addresses):
        # A private, loopback or link-local address is reachable only when the
        # allowlist names the host itself: `*.example.com` must not become a way
        # into the pod's own network.
        raise ToolError(f"host {origin.host!r} resolves to a private address; list it "
                        "exactly in allowed_hosts to allow it")
    return Target(url, origin, addresses[0])


async def _addresses(host: str, port: int) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host))]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port,
                                                             type=socket.SOCK_STREAM)
    except OSError:
        raise ToolError(f"host {host!r} could not be resolved") from None
    addresses = [str(info[4][0]).partition("%")[0] for info in infos]
    if not addresses:
        raise ToolError(f"host {host!r} could not be resolved")
    return addresses


def pinned_request(target: Target, method: str, headers: dict[str, str],
                   body: bytes | None) -> httpx.Request:
    """A request to the checked address: `Host` and TLS SNI keep the name, so virtual
    hosts answer and the certificate is checked against the name, not the address."""
    parts: SplitResult = urlsplit(target.url)
    host = target.origin.host
    default = target.origin.port == DEFAULT_PORTS[target.origin.scheme]
    host_header = (f"[{host}]" if ":" in host else host) + \
        ("" if default else f":{target.origin.port}")
    url = httpx.URL(target.url).copy_with(host=target.address, port=target.origin.port)
    extensions = {"sni_hostname": host} if parts.scheme.lower() == "https" else {}
    return httpx.Request(method, url, headers={**headers, "host": host_header},
                         content=body, extensions=extensions)
