"""Running an `http` server tool: one allowlisted HTTP call per tool call.

Owns: filling the URL template (every argument escaped, none climbing the
template's path), reading secret header values from the environment at call
time, following redirects (each checked like the first URL, by
`http_target`), retries with backoff, and the `result` selector.
Must not: follow a redirect off the list, send the configured headers to any
origin but the tool's own, keep cookies from one call to the next, turn a
URL's user info into credentials, put a header value in an error message, or
read more than the caps (`http_body`).
"""

from __future__ import annotations

import asyncio
import os
import re
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import httpx
import orjson

from proxy.capabilities.server_tools import ENV_REFERENCE, HttpTool
from proxy.server_tools.http_body import ACCEPT_ENCODING, read_capped
from proxy.server_tools.http_target import origin_of, pinned_request, resolve_target
from proxy.server_tools.local import ToolError, as_text

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SELECTOR_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[\"([^\"]*)\"\]")
_MAX_REDIRECTS = 3


def fill_url(template: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The URL with `{name}` filled in (escaped, `/` included) and the unused arguments.

    A value in the path may not be, or decode to, a `.` or `..` segment: URL
    normalisation (ours or the server's, after it decodes `%2e` or `%2f`)
    would let it climb out of the template's path.
    """
    used: set[str] = set()
    path_end = _path_end(template)

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in arguments:
            raise ToolError(f"argument {name!r} is required")
        used.add(name)
        value = arguments[name]
        text = value if isinstance(value, str) else as_text(value)
        if match.start() < path_end and _climbs(text):
            raise ToolError(f"argument {name!r} may not contain '.' or '..' path segments")
        return quote(text, safe="")

    url = _PLACEHOLDER.sub(one, template)
    return url, {k: v for k, v in arguments.items() if k not in used}


def _path_end(template: str) -> int:
    ends = [i for i in (template.find("?"), template.find("#")) if i >= 0]
    return min(ends) if ends else len(template)


def _climbs(text: str) -> bool:
    for _ in range(4):  # %252e%252e -> %2e%2e -> ..: servers decode more than once
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    return any(part in (".", "..") for part in re.split(r"[/\\]", text))


def expand_env(value: str, environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ToolError(f"the tool's configuration needs environment variable {name}")
        return environ[name]

    return ENV_REFERENCE.sub(one, value)


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


async def _once(tool: HttpTool, url: str, rest: dict[str, Any], secret: dict[str, str],
                client: httpx.AsyncClient) -> str:
    method: str = tool.method
    body = None if method in ("GET", "DELETE") else orjson.dumps(rest)
    if body is None and rest:
        url = str(httpx.URL(url).copy_merge_params(rest))
    home = origin_of(url)
    for _ in range(_MAX_REDIRECTS + 1):
        target = await resolve_target(url, tool.allowed_hosts, home)
        # The configured headers (secrets) go to the tool's own origin only: never
        # to another host, port or scheme a redirect points at.
        headers = {**(secret if target.origin == home else {}),
                   "accept-encoding": ACCEPT_ENCODING,
                   **({"content-type": "application/json"} if body else {})}
        # Built here, not with client.build_request: no cookie jar, no client-wide
        # headers or auth; each call starts clean.
        request = pinned_request(target, method, headers, body)
        try:
            response = await client.send(request, stream=True, follow_redirects=False)
        except httpx.TimeoutException:
            raise _Retryable("the tool's host did not answer in time") from None
        except httpx.TransportError:
            raise _Retryable("the tool's host could not be reached") from None
        try:
            if response.is_redirect and "location" in response.headers:
                url = _redirect(url, response.headers["location"])
                method, body = _redirect_method(method, response.status_code, body)
                continue
            raw, _ = await read_capped(response, tool.max_result_bytes, tool.max_result_bytes)
        finally:
            await response.aclose()
        if response.status_code >= 500:
            raise _Retryable(f"the tool's host answered {response.status_code}")
        if response.status_code >= 400:
            raise ToolError(f"the tool's host answered {response.status_code}: "
                            f"{raw[:200].decode(errors='replace')}")
        return _result(raw, tool)
    raise ToolError("the tool's host redirected too many times")


def _redirect(url: str, location: str) -> str:
    try:
        nxt = str(httpx.URL(url).join(location.strip()))
    except (httpx.InvalidURL, ValueError):
        raise ToolError("the tool's host redirected to an invalid URL") from None
    if "@" in urlsplit(nxt).netloc:
        # A Location of user:pw@host would become Basic credentials: refused.
        raise ToolError("the tool's host redirected to a URL with user info")
    return nxt


def _redirect_method(method: str, status: int, body: bytes | None
                     ) -> tuple[str, bytes | None]:
    """As browsers and httpx do: 303 (and 301/302 after a POST) become a GET without body."""
    if status == 303 and method != "HEAD" or status in (301, 302) and method == "POST":
        return "GET", None
    return method, body


def _result(raw: bytes, tool: HttpTool) -> str:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        if tool.result:
            raise ToolError("the tool's host did not answer JSON") from None
        return raw.decode(errors="replace")
    return as_text(select(value, tool.result))
