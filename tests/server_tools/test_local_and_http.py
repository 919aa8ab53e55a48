from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from proxy.capabilities.server_tools import (
    HttpTool,
    MockTool,
    ServerToolDefinition,
)
from proxy.server_tools.http_target import origin_of, resolve_target
from proxy.server_tools.http_tool import fill_url, run_http, select
from proxy.server_tools.local import ToolError, run_builtin_named, run_mock
from tests.support.servers import serve

DEFINITION: TypeAdapter[Any] = TypeAdapter(ServerToolDefinition)


def test_definitions_are_validated_by_kind() -> None:
    assert isinstance(DEFINITION.validate_python({"kind": "mock", "result": "shipped"}), MockTool)
    with pytest.raises(ValidationError, match="allowed_hosts"):
        DEFINITION.validate_python({"kind": "http", "url": "https://a.example/x"})
    with pytest.raises(ValidationError, match="exactly one of command"):
        DEFINITION.validate_python({"kind": "mcp"})
    with pytest.raises(ValidationError, match="builtin"):
        DEFINITION.validate_python({"kind": "builtin", "builtin": "shell"})
    with pytest.raises(ValidationError, match="Extra inputs"):
        DEFINITION.validate_python({"kind": "mock", "reslt": 1})


def test_mock_table_then_fallback() -> None:
    tool = MockTool(kind="mock", result="unknown order", results=[
        {"arguments": {"order_id": "A1"}, "result": {"status": "shipped"}}])
    assert run_mock(tool, {"order_id": "A1"}) == '{"status":"shipped"}'
    assert run_mock(tool, {"order_id": "B2"}) == "unknown order"


def test_builtins() -> None:
    # By name, as the runner's worker process runs them (server_tools/worker.py).
    assert run_builtin_named("calculator", {"expression": "(2+3)*4"}) == "20"
    with pytest.raises(ToolError, match="only the listed math functions"):
        run_builtin_named("calculator", {"expression": "__import__('os')"})
    now = json.loads(run_builtin_named("current_time", {"timezone": "Asia/Tokyo"}))
    assert now["timezone"] == "Asia/Tokyo" and now["datetime"].endswith("+09:00")
    with pytest.raises(ToolError, match="unknown timezone"):
        run_builtin_named("current_time", {"timezone": "Mars/X"})
    assert json.loads(run_builtin_named("echo", {"a": [1, 2]})) == {"a": [1, 2]}
    with pytest.raises(ToolError, match="unknown builtin"):
        run_builtin_named("rm_rf", {})


def test_url_template_escapes_every_argument() -> None:
    url, rest = fill_url("https://h.example/stock/{item}", {"item": "a b/?x..", "n": 2})
    assert url == "https://h.example/stock/a%20b%2F%3Fx.."
    assert rest == {"n": 2}
    with pytest.raises(ToolError, match="'item' is required"):
        fill_url("https://h.example/{item}", {})


@pytest.mark.parametrize("value", ["..", ".", "../admin", "a/../../admin", "%2e%2e",
                                   "%2E%2E%2Fadmin", "..%2f..%2fadmin", "%252e%252e",
                                   "..\\admin"])
def test_an_argument_cannot_climb_the_templates_path(value: str) -> None:
    with pytest.raises(ToolError, match="may not contain '.' or '..'"):
        fill_url("https://h.example/api/v1/items/{item}/stock", {"item": value})
    # In the query it is only data.
    url, _ = fill_url("https://h.example/api/search?q={q}", {"q": value})
    assert url.startswith("https://h.example/api/search?q=")


def test_result_selector() -> None:
    doc = {"data": {"items": [{"name": "a"}, {"name": "b"}], "odd key": 1}}
    assert select(doc, "$.data.items[1].name") == "b"
    assert select(doc, '$.data["odd key"]') == 1
    assert select(doc, None) == doc
    with pytest.raises(ToolError, match="nothing at"):
        select(doc, "$.data.missing")


async def check_host(url: str, allowed: list[str]) -> None:
    await resolve_target(url, allowed, origin_of(url))


async def test_private_addresses_need_an_exact_entry() -> None:
    await check_host("http://127.0.0.1:9/x", ["127.0.0.1"])
    with pytest.raises(ToolError, match="not in the tool's allowed_hosts"):
        await check_host("http://127.0.0.1:9/x", ["example.com"])
    with pytest.raises(ToolError, match="private address"):
        await check_host("http://localhost:9/x", ["local*"])
    with pytest.raises(ToolError, match="http"):
        await check_host("file:///etc/passwd", ["*"])


class Upstream:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []
        self.fail_next = 0

    def app(self) -> Starlette:
        async def stock(request: Request) -> Response:
            self.seen.append({"path": request.url.path, "query": dict(request.query_params),
                              "key": request.headers.get("x-api-key")})
            if self.fail_next:
                self.fail_next -= 1
                return PlainTextResponse("busy", status_code=503)
            return JSONResponse({"data": {"item": request.path_params["item"], "level": 7}})

        async def away(request: Request) -> Response:
            return RedirectResponse("http://169.254.169.254/latest/meta-data", status_code=302)

        async def big(request: Request) -> Response:
            return PlainTextResponse("x" * 100_000)

        return Starlette(routes=[Route("/stock/{item}", stock), Route("/away", away),
                                 Route("/big", big)])


@pytest.fixture
def upstream() -> Iterator[tuple[Upstream, str]]:
    fake = Upstream()
    with serve(fake.app()) as url:
        yield fake, url


@pytest.fixture
async def http_client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=2) as client:
        yield client


def _tool(url: str, **extra: Any) -> HttpTool:
    return HttpTool(kind="http", url=url, allowed_hosts=["127.0.0.1"], backoff=0.01,
                    **extra)


async def test_http_tool_fills_selects_and_sends_the_secret(
    upstream: tuple[Upstream, str], http_client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, url = upstream
    monkeypatch.setenv("INVENTORY_KEY", "s3cret-value")
    tool = _tool(url + "/stock/{item}", headers={"X-Api-Key": "${INVENTORY_KEY}"},
                 result="$.data.level")
    assert await run_http(tool, {"item": "bolt", "warehouse": "n"}, http_client) == "7"
    assert fake.seen == [{"path": "/stock/bolt", "query": {"warehouse": "n"},
                          "key": "s3cret-value"}]


async def test_http_tool_retries_a_5xx_then_gives_up(
    upstream: tuple[Upstream, str], http_client: httpx.AsyncClient,
) -> None:
    fake, url = upstream
    fake.fail_next = 1
    assert "bolt" in await run_http(_tool(url + "/stock/{item}", retries=1), {"item": "bolt"},
                                    http_client)
    fake.fail_next = 5
    with pytest.raises(ToolError, match="answered 503"):
        await run_http(_tool(url + "/stock/{item}", retries=2), {"item": "x"}, http_client)
    assert len(fake.seen) == 2 + 3


async def test_http_tool_refuses_redirects_off_the_list_and_caps_the_answer(
    upstream: tuple[Upstream, str], http_client: httpx.AsyncClient,
) -> None:
    _, url = upstream
    with pytest.raises(ToolError, match="169.254.169.254"):
        await run_http(_tool(url + "/away"), {}, http_client)
    text = await run_http(_tool(url + "/big", max_result_bytes=1000), {}, http_client)
    assert len(text) < 100_000


async def test_http_tool_timeout_and_missing_secret(http_client: httpx.AsyncClient) -> None:
    with pytest.raises(ToolError, match="could not be reached|did not answer"):
        await run_http(_tool("http://127.0.0.1:9/x", retries=0), {}, http_client)
    with pytest.raises(ToolError, match="environment variable NOPE_NOT_SET") as info:
        await run_http(_tool("http://127.0.0.1:9/x", headers={"K": "${NOPE_NOT_SET}"}), {},
                       http_client)
    assert "${" not in str(info.value)
