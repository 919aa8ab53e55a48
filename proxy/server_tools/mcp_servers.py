"""MCP servers as a tool source: one long-lived connection per `mcp` entry.

Owns: starting each server (stdio subprocess with only the environment its
entry names, or streamable HTTP with headers read from the environment),
listing its tools at start and when it says the list changed, filtering them
by `include`/`exclude`, offering them as `<entry>__<tool>`, calling them, and
reporting each server's state for /readyz and /admin. Must not: let a server
that cannot start stop the proxy (its tools are simply not offered), or put a
secret from the environment into a state message or a log line.

The official `mcp` SDK does the protocol. Its client is an async context
manager that must be entered and left in one task, so each server runs in
its own task for the app's life; calls from request tasks go through the
open session.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

from proxy.capabilities.server_tools import McpTool
from proxy.server_tools.http_tool import expand_env
from proxy.server_tools.local import ToolError, as_text

log = logging.getLogger("toolshim.server_tools")

McpState = Literal["starting", "ready", "failed", "stopped"]
_RETRY_AFTER = 30.0


@dataclass
class OfferedMcpTool:
    """One tool a server offers, under the name the model sees."""

    offered_name: str
    server_name: str
    tool_name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class McpServer:
    entry: str
    definition: McpTool
    state: McpState = "starting"
    error: str | None = None
    tools: dict[str, OfferedMcpTool] = field(default_factory=dict)
    _client: Any = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _relist: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        """Connect, list, serve calls until stopped; reconnect after a failure."""
        while not self._stop.is_set():
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - the SDK raises groups and OSErrors alike
                self._fail(exc)
            if self._stop.is_set():
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), _RETRY_AFTER)
        self.state, self._client = "stopped", None

    async def _session(self) -> None:
        from mcp import Client  # imported when an mcp entry exists: the SDK is heavy

        async with contextlib.AsyncExitStack() as stack:
            client = await stack.enter_async_context(Client(
                await self._transport(stack), mode="legacy", message_handler=self._on_message))
            self._client = client
            await self._list()
            self.state, self.error = "ready", None
            log.info("MCP server %s ready with %d tools", self.entry, len(self.tools))
            while not self._stop.is_set():
                relist = asyncio.ensure_future(self._relist.wait())
                stop = asyncio.ensure_future(self._stop.wait())
                await asyncio.wait({relist, stop}, return_when=asyncio.FIRST_COMPLETED)
                relist.cancel()
                stop.cancel()
                if self._relist.is_set():
                    self._relist.clear()
                    await self._list()
        self._client = None

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        spec = self.definition
        if spec.command is not None:
            from mcp import StdioServerParameters

            command = sys.executable if spec.command in ("python", "python3") else spec.command
            return StdioServerParameters(
                command=command, args=list(spec.args),
                env={name: expand_env(value) for name, value in spec.env.items()})
        import httpx2  # the transport the mcp SDK is built on
        from mcp.client.streamable_http import streamable_http_client

        headers = {name: expand_env(value) for name, value in spec.headers.items()}
        # A client we pass in is ours to close, not the transport's.
        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers=headers, timeout=spec.timeout, follow_redirects=False))
        return streamable_http_client(str(spec.url), http_client=http)

    async def _on_message(self, message: Any) -> None:
        # notifications/tools/list_changed: list again (outside the SDK's reader task).
        method = getattr(getattr(message, "root", message), "method", "")
        if method == "notifications/tools/list_changed":
            self._relist.set()

    async def _list(self) -> None:
        listing = await asyncio.wait_for(self._client.list_tools(), self.definition.timeout)
        tools: dict[str, OfferedMcpTool] = {}
        for tool in listing.tools:
            if not self._wanted(tool.name):
                continue
            offered = f"{self.entry}__{tool.name}"
            tools[offered] = OfferedMcpTool(offered, self.entry, tool.name, tool.description or "",
                                      dict(tool.input_schema or {"type": "object"}))
        self.tools = tools

    def _wanted(self, name: str) -> bool:
        spec = self.definition
        if spec.include and not any(fnmatch.fnmatchcase(name, g) for g in spec.include):
            return False
        return not any(fnmatch.fnmatchcase(name, g) for g in spec.exclude)

    def _fail(self, exc: BaseException) -> None:
        # Only the exception's kind and the entry: its text may quote a header or an env value.
        leaf = exc
        while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
            leaf = leaf.exceptions[0]
        self.state, self.tools, self._client = "failed", {}, None
        self.error = f"{leaf.__class__.__name__}: could not start or lost the connection"
        log.warning("MCP server %s unavailable (%s); its tools are not offered",
                    self.entry, leaf.__class__.__name__)

    async def call(self, tool: OfferedMcpTool, arguments: dict[str, Any]) -> str:
        client = self._client
        if client is None or self.state != "ready":
            raise ToolError(f"MCP server {self.entry} is not available")
        result = await asyncio.wait_for(client.call_tool(tool.tool_name, arguments),
                                        self.definition.timeout)
        text = "\n".join(part.text for part in result.content if getattr(part, "text", None))
        if result.is_error:
            raise ToolError(text or "the MCP tool failed")
        if not text and result.structured_content is not None:
            return as_text(result.structured_content)
        return text

    def stop(self) -> None:
        self._stop.set()


class McpServers:
    """Every `mcp` entry's server, started in the lifespan and stopped with it."""

    def __init__(self) -> None:
        self.servers: dict[str, McpServer] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def apply(self, entries: dict[str, McpTool]) -> None:
        """Start new entries, stop removed or changed ones (after a reload of the file)."""
        for name in list(self.servers):
            if entries.get(name) != self.servers[name].definition:
                self._stop(name)
        for name, definition in entries.items():
            if name not in self.servers:
                server = McpServer(name, definition)
                self.servers[name] = server
                self._tasks[name] = asyncio.create_task(server.run(), name=f"mcp:{name}")

    def tools(self) -> dict[str, OfferedMcpTool]:
        return {name: tool for server in self.servers.values() for name, tool in
                server.tools.items()}

    def state(self) -> dict[str, dict[str, Any]]:
        return {name: {"state": s.state, "error": s.error, "tools": sorted(s.tools)}
                for name, s in self.servers.items()}

    async def call(self, offered_name: str, arguments: dict[str, Any]) -> str:
        tool = self.tools().get(offered_name)
        if tool is None:
            raise ToolError(f"no MCP tool {offered_name!r} is available")
        return await self.servers[tool.server_name].call(tool, arguments)

    def _stop(self, name: str) -> None:
        self.servers.pop(name).stop()
        task = self._tasks.pop(name)
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        for name in list(self.servers):
            self._stop(name)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=5)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
