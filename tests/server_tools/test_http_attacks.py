"""The `http` tool against hostile answers, on real loopback sockets.

Each server is a stdlib HTTP server on 127.0.0.x that records what reached it:
cookies set by one call, secrets followed through a redirect, user info in a
Location, a redirect to another port, a path climbed with `..`, a name that
resolves to another address at connect time than at check time, TLS with the
name kept, and a gzip bomb.
"""

from __future__ import annotations

import gzip
import socket
import ssl
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import orjson
import pytest
import trustme

from proxy.capabilities.server_tools import HttpTool
from proxy.server_tools.host import ToolHost
from proxy.server_tools.http_tool import run_http
from proxy.server_tools.local import ToolError

Route = Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]


class Site:
    """A loopback HTTP server: `routes` answer by path; every request is recorded."""

    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.seen: list[dict[str, Any]] = []
        self.sni: list[str | None] = []


@contextmanager
def site(routes: dict[str, Route], host: str = "127.0.0.1", port: int = 0,
         tls: ssl.SSLContext | None = None) -> Iterator[tuple[Site, int]]:
    state = Site(routes)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.seen.append({"path": self.path, "headers": dict(self.headers.items())})
            route = state.routes.get(self.path.split("?")[0])
            status, headers, body = route(self) if route else (404, {}, b"no")
            self.send_response(status)
            for name, value in {"content-length": str(len(body)), **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    if tls is not None:
        tls.sni_callback = lambda sock, name, ctx: state.sni.append(name)
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def text(body: str, headers: dict[str, str] | None = None) -> Route:
    return lambda handler: (200, headers or {}, body.encode())


def redirect(location: str) -> Route:
    return lambda handler: (302, {"location": location}, b"")


def show(handler: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
    return 200, {"content-type": "application/json"}, orjson.dumps(
        {k.lower(): v for k, v in handler.headers.items()})


def tool(url: str, allowed: list[str], **extra: Any) -> HttpTool:
    return HttpTool(kind="http", url=url, allowed_hosts=allowed, retries=0, **extra)


@pytest.fixture
async def client() -> Any:
    async with httpx.AsyncClient(timeout=5) as http:
        yield http


async def test_no_cookie_reaches_the_next_call(client: httpx.AsyncClient) -> None:
    with site({"/set": text("ok", {"set-cookie": "session=abc123; Path=/"}),
               "/show": show}) as (_, port):
        base = f"http://127.0.0.1:{port}"
        host = ToolHost()
        for http in (client, host.http):
            await run_http(tool(base + "/set", ["127.0.0.1"]), {}, http)
            seen = orjson.loads(await run_http(tool(base + "/show", ["127.0.0.1"]), {}, http))
            assert "cookie" not in seen
        assert not list(host.http.cookies.jar)  # the ToolHost's jar takes none at all
        await host.aclose()


async def test_secrets_go_to_the_tools_own_origin_only(
        client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_SECRET", "s3cret")
    with site({"/show": show}) as (other, other_port), \
            site({"/show": show, "/self": redirect("/show"),
                  "/host": redirect(f"http://localhost:{other_port}/show"),
                  "/port": redirect(f"http://127.0.0.1:{other_port}/show")}) as (_, port):
        allowed = ["127.0.0.1", f"127.0.0.1:{other_port}", f"localhost:{other_port}"]
        own = tool(f"http://127.0.0.1:{port}" + "/{hop}", allowed,
                   headers={"X-Api-Key": "${TOOL_SECRET}"})
        assert orjson.loads(await run_http(own, {"hop": "self"}, client))["x-api-key"] \
            == "s3cret"
        for hop in ("host", "port"):
            seen = orjson.loads(await run_http(own, {"hop": hop}, client))
            assert "x-api-key" not in seen, hop
        assert len(other.seen) == 2


async def test_user_info_in_a_redirect_is_not_turned_into_credentials(
        client: httpx.AsyncClient) -> None:
    with site({"/show": show}) as (state, port):
        state.routes["/creds"] = redirect(f"http://admin:hunter2@127.0.0.1:{port}/show")
        with pytest.raises(ToolError, match="user info"):
            await run_http(tool(f"http://127.0.0.1:{port}/creds", ["127.0.0.1"]), {}, client)
        assert [s["path"] for s in state.seen] == ["/creds"]  # /show never asked


async def test_a_redirect_to_another_port_of_an_allowed_host_is_refused(
        client: httpx.AsyncClient) -> None:
    with site({"/show": show}) as (internal, internal_port), \
            site({"/go": redirect(f"http://127.0.0.1:{internal_port}/show")}) as (_, port):
        with pytest.raises(ToolError, match=f"allowed_hosts \\(port {internal_port}\\)"):
            await run_http(tool(f"http://127.0.0.1:{port}/go", ["127.0.0.1"]), {}, client)
        assert internal.seen == []


@pytest.mark.parametrize("value", ["..", "%2e%2e", "..%2f..%2fadmin"])
async def test_an_argument_does_not_climb_out_of_the_template(
        client: httpx.AsyncClient, value: str) -> None:
    with site({"/api/admin": text("secret admin page"), "/admin": text("root admin")}) \
            as (state, port):
        with pytest.raises(ToolError, match="path segments"):
            await run_http(tool(f"http://127.0.0.1:{port}" + "/api/items/{item}/x",
                                ["127.0.0.1"]), {"item": value}, client)
        assert state.seen == []


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names the test answers for: each lookup takes the next address (the last repeats)."""
    answers: dict[str, list[str]] = {}
    lookups: dict[str, int] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name not in answers:
            return real(host, port, *args, **kwargs)
        n = lookups[name] = lookups.get(name, 0) + 1
        address = answers[name][min(n, len(answers[name])) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    answers["__lookups__"] = lookups  # type: ignore[assignment]
    return answers


async def test_the_checked_address_is_the_one_connected_to(
        client: httpx.AsyncClient, resolver: dict[str, Any]) -> None:
    # The name answers 127.0.0.1 when checked, then 127.0.0.2 (the "internal
    # service" on the same port): a second lookup at connect time would reach it.
    with site({"/who": text("checked")}) as (_, port), \
            site({"/who": text("rebound")}, host="127.0.0.2", port=port) as (rebound, _):
        resolver["rebind.test"] = ["127.0.0.1", "127.0.0.2"]
        answer = await run_http(tool(f"http://rebind.test:{port}/who", ["rebind.test"]), {},
                                client)
        assert answer == "checked" and rebound.seen == []
        assert resolver["__lookups__"]["rebind.test"] == 1


async def test_a_globbed_name_is_sent_to_the_public_address_it_was_checked_at(
        resolver: dict[str, Any]) -> None:
    # Checked at a public address, then rebound to loopback: the request must go
    # to the checked address (no second lookup). Recorded at the transport, so
    # nothing leaves this machine.
    resolver["api.rebind.test"] = ["93.184.216.34", "127.0.0.1"]
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, stream=httpx.ByteStream(b"ok"))

    async with httpx.AsyncClient(transport=httpx.MockTransport(record)) as http:
        assert await run_http(tool("https://api.rebind.test/v1", ["*.rebind.test"]), {},
                              http) == "ok"
    (request,) = sent
    assert request.url.host == "93.184.216.34" and request.headers["host"] == "api.rebind.test"
    assert request.extensions["sni_hostname"] == "api.rebind.test"
    assert resolver["__lookups__"]["api.rebind.test"] == 1


async def test_https_keeps_the_name_for_host_sni_and_the_certificate(
        resolver: dict[str, Any]) -> None:
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("tool.test").configure_cert(server_tls)
    client_tls = ssl.create_default_context()
    ca.configure_trust(client_tls)
    resolver["tool.test"] = ["127.0.0.1"]
    with site({"/show": show}, tls=server_tls) as (state, port):
        async with httpx.AsyncClient(verify=client_tls, timeout=5) as http:
            seen = orjson.loads(await run_http(
                tool(f"https://tool.test:{port}/show", ["tool.test"]), {}, http))
    assert seen["host"] == f"tool.test:{port}"
    assert state.sni == ["tool.test"]


def _bomb(size: int) -> bytes:
    out = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    return b"".join(out.compress(block) for _ in range(size >> 20)) + out.flush()


async def test_a_gzip_bomb_is_cut_at_the_cap_without_inflating(
        client: httpx.AsyncClient) -> None:
    bomb = _bomb(64 << 20)
    assert len(bomb) < 100_000
    with site({"/bomb": lambda h: (200, {"content-encoding": "gzip"}, bomb)}) as (_, port):
        tracemalloc.start()
        try:
            answer = await run_http(tool(f"http://127.0.0.1:{port}/bomb", ["127.0.0.1"],
                                         max_result_bytes=50_000), {}, client)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert len(answer) <= 50_001  # one byte past the cap: the runner marks it as cut
    assert peak < 8 << 20, f"peak {peak} bytes while reading a capped answer"


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "raw-deflate"])
async def test_compressed_answers_still_decode(client: httpx.AsyncClient,
                                               encoding: str) -> None:
    body = orjson.dumps({"data": {"level": 7}})
    packed = {"gzip": gzip.compress(body), "deflate": zlib.compress(body),
              "raw-deflate": zlib.compress(body)[2:-4]}[encoding]
    header = "gzip" if encoding == "gzip" else "deflate"
    with site({"/x": lambda h: (200, {"content-encoding": header}, packed)}) as (_, port):
        answer = await run_http(tool(f"http://127.0.0.1:{port}/x", ["127.0.0.1"],
                                     result="$.data.level"), {}, client)
    assert answer == "7"
