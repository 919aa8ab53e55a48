"""Running an `http` server tool: one allowlisted HTTP call per tool call.

Owns: filling the URL template (every argument escaped), reading secret
header values from the environment at call time, the host allowlist (checked
for the first URL and for every redirect, and refusing hosts that resolve to
private or loopback addresses unless the allowlist names them exactly),
retries with backoff, a cap on the bytes read, and the `result` selector.
Must not: follow a redirect to a host off the list, put a header value in an
error message, or read more than the cap from the network.
"""

from __future__ import annotations

import asyncio
import fnmatch
import ipaddress
import os
import re
import socket
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx
import orjson

from proxy.server_tools.definitions import ENV_REFERENCE, HttpTool
from proxy.server_tools.local import ToolError, as_text

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SELECTOR_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]")
_MAX_REDIRECTS = 3


def fill_url(template: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The URL with `{name}` filled in (escaped, `/` included) and the unused arguments."""
    used: set[str] = set()

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in arguments:
            raise ToolError(f"argument {name!r} is required")
        used.add(name)
        value = arguments[name]
        return quote(value if isinstance(value, str) else as_text(value), safe="")

    url = _PLACEHOLDER.sub(one, template)
    return url, {k: v for k, v in arguments.items() if k not in used}


def expand_env(value: str, environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ToolError(f"the tool's configuration needs environment variable {name}")
        return environ[name]

    return ENV_REFERENCE.sub(one, value)


def host_allowed(host: str, allowed: list[str]) -> bool:
    host = host.lower().rstrip(".")
    return any(fnmatch.fnmatchcase(host, pattern.lower()) for pattern in allowed)


async def check_host(url: str, allowed: list[str]) -> None:
    """Refuse a URL off the allowlist, or one whose host resolves to a private address.

    A private, loopback or link-local address is reachable only when the
    allowlist names the host itself (not through a glob): `*.example.com`
    must not become a way into the pod's own network.
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise ToolError("the tool may only call http(s) URLs")
    if not host_allowed(host, allowed):
        raise ToolError(f"host {host!r} is not in the tool's allowed_hosts")
    if host in (pattern.lower() for pattern in allowed):
        return
    for address in await _addresses(host, parts.port or 443):
        if not ipaddress.ip_address(address).is_global:
            raise ToolError(f"host {host!r} resolves to a private address; list it "
                            "exactly in allowed_hosts to allow it")


async def _addresses(host: str, port: int) -> list[str]:
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port,
                                                             type=socket.SOCK_STREAM)
    except OSError:
        raise ToolError(f"host {host!r} could not be resolved") from None
    return [str(info[4][0]) for info in infos]


def select(value: Any, selector: str | None) -> Any:
    """`$.a.b[0]["c d"]` into a decoded JSON value; ToolError when a step is missing."""
    if not selector or selector == "$":
        return value
    path = selector[1:] if selector.startswith("$") else "." + selector
    pos = 0
    while pos < len(path):
        step = _SELECTOR_STEP.match(path, pos)
        if step is None:
            raise ToolError(f"bad result selector {selector!r}")
        key = step.group(1) or step.group(3)
        try:
            value = value[int(step.group(2))] if key is None else value[key]
        except (KeyError, IndexError, TypeError):
            raise ToolError(f"the answer has nothing at {path[: step.end()]!r}") from None
        pos = step.end()
    return value


async def run_http(tool: HttpTool, arguments: dict[str, Any], client: httpx.AsyncClient) -> str:
    url, rest = fill_url(tool.url, arguments)
    headers = {name: expand_env(value) for name, value in tool.headers.items()}
    attempt = 0
    while True:
        try:
            return await _once(tool, url, rest, headers, client)
        except _Retryable as exc:
            attempt += 1
            if attempt > tool.retries:
                raise ToolError(str(exc)) from None
            await asyncio.sleep(tool.backoff * 2 ** (attempt - 1))


class _Retryable(Exception):
    """A timeout, a connection failure or a 5xx: worth another try."""


async def _once(tool: HttpTool, url: str, rest: dict[str, Any], headers: dict[str, str],
                client: httpx.AsyncClient) -> str:
    method = tool.method
    body = None if method in ("GET", "DELETE") else orjson.dumps(rest)
    params = rest if method in ("GET", "DELETE") else None
    for _ in range(_MAX_REDIRECTS + 1):
        await check_host(url, tool.allowed_hosts)
        request = client.build_request(method, url, params=params, content=body, headers={
            **headers, **({"content-type": "application/json"} if body else {})})
        try:
            response = await client.send(request, stream=True, follow_redirects=False)
        except httpx.TimeoutException:
            raise _Retryable("the tool's host did not answer in time") from None
        except httpx.TransportError:
            raise _Retryable("the tool's host could not be reached") from None
        try:
            if response.is_redirect and "location" in response.headers:
                url, params = urljoin(url, response.headers["location"]), None
                continue
            raw = await _read_capped(response, tool.max_result_bytes)
        finally:
            await response.aclose()
        if response.status_code >= 500:
            raise _Retryable(f"the tool's host answered {response.status_code}")
        if response.status_code >= 400:
            raise ToolError(f"the tool's host answered {response.status_code}: "
                            f"{raw[:200].decode(errors='replace')}")
        return _result(raw, tool)
    raise ToolError("the tool's host redirected too many times")


async def _read_capped(response: httpx.Response, cap: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for piece in response.aiter_bytes():
        parts.append(piece)
        size += len(piece)
        if size > cap:
            break
    return b"".join(parts)


def _result(raw: bytes, tool: HttpTool) -> str:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        if tool.result:
            raise ToolError("the tool's host did not answer JSON") from None
        return raw.decode(errors="replace")
    return as_text(select(value, tool.result))
