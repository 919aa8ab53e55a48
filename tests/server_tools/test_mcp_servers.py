"""MCP servers for real: mcp-server-time over stdio, and one served over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator

import pytest

from proxy.capabilities.server_tools import McpTool
from proxy.server_tools.local import ToolError
from proxy.server_tools.mcp_servers import McpServers
from tests.support.mcp_inventory import inventory_app
from tests.support.servers import serve


async def _ready(servers: McpServers, name: str) -> None:
    for _ in range(300):
        if servers.servers[name].state in ("ready", "failed"):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never became ready")


async def test_stdio_server_listed_filtered_and_called() -> None:
    servers = McpServers()
    servers.apply({"time": McpTool(kind="mcp", command="python",
                                   args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
                                   exclude=["convert_*"])})
    try:
        await _ready(servers, "time")
        assert servers.state()["time"] == {"state": "ready", "error": None,
                                           "tools": ["time__get_current_time"]}
        tool = servers.tools()["time__get_current_time"]
        assert tool.parameters["required"] == ["timezone"]
        answer = json.loads(await servers.call("time__get_current_time",
                                               {"timezone": "Asia/Tokyo"}))
        assert answer["timezone"] == "Asia/Tokyo" and answer["datetime"].endswith("+09:00")
        with pytest.raises(ToolError):
            await servers.call("time__get_current_time", {"timezone": "Nowhere/Atlantis"})
    finally:
        await servers.aclose()
    assert servers.servers == {}


async def test_a_server_that_cannot_start_is_reported_not_raised() -> None:
    servers = McpServers()
    servers.apply({"broken": McpTool(kind="mcp", command=sys.executable,
                                     args=["-c", "import sys; sys.exit(3)"])})
    try:
        await _ready(servers, "broken")
        state = servers.state()["broken"]
        assert state["state"] == "failed" and state["tools"] == []
        with pytest.raises(ToolError, match="no MCP tool"):
            await servers.call("broken__anything", {})
    finally:
        await servers.aclose()


@pytest.fixture
def http_mcp_url() -> Iterator[str]:
    with serve(inventory_app()) as url:
        yield url + "/mcp"


async def test_streamable_http_server_with_headers_from_env(
    http_mcp_url: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("INVENTORY_TOKEN", "tok-123")
    servers = McpServers()
    servers.apply({"inv": McpTool(kind="mcp", url=http_mcp_url,
                                  headers={"Authorization": "Bearer ${INVENTORY_TOKEN}"})})
    try:
        await _ready(servers, "inv")
        assert servers.state()["inv"]["state"] == "ready", servers.state()
        assert list(servers.tools()) == ["inv__stock"]
        assert await servers.call("inv__stock", {"item": "bolt"}) == "bolt: 7 in stock"
    finally:
        await servers.aclose()
