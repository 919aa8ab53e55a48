"""The server tools of a running app: the runner, the MCP servers, the set-aside parts.

Owns: following capabilities.yaml's `server_tools:` section (applied at start
and again whenever a reload changes it: MCP servers start and stop with
their entries), the http client the `http` tools use, and the store of
server calls set aside from mixed turns (per client, bounded). Must not: put
secrets in `state()` (it is shown on /readyz and /admin).
"""

from __future__ import annotations

from collections.abc import Mapping
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any

import httpx

from proxy.capabilities.server_tools import McpTool
from proxy.server_tools.kept import KeptCalls
from proxy.server_tools.mcp_servers import McpServers
from proxy.server_tools.runner import Definition, ServerTools


class ToolHost:
    def __init__(self) -> None:
        # A jar that takes no cookie: what one tool's host sets must not reach the next
        # call (another model's, another client's).
        no_cookies = CookieJar(DefaultCookiePolicy(allowed_domains=[]))
        self.http = httpx.AsyncClient(timeout=30, follow_redirects=False, trust_env=False,
                                      cookies=no_cookies)
        self.mcp = McpServers()
        self.runner = ServerTools({}, self.mcp, self.http)
        self.set_aside = KeptCalls()
        self._applied: Mapping[str, Definition] | None = None

    def sync(self, definitions: Mapping[str, Definition]) -> None:
        """Follow the file: cheap when the section is the one applied last."""
        if definitions is self._applied:
            return
        self._applied = definitions
        self.runner.definitions = dict(definitions)
        self.mcp.apply({n: d for n, d in definitions.items() if isinstance(d, McpTool)})

    def offered(self, patterns: tuple[str, ...]) -> list[dict[str, Any]]:
        return self.runner.offered(patterns) if patterns else []

    def state(self) -> dict[str, dict[str, Any]]:
        """Each MCP server's state (no command lines, URLs or environment)."""
        return self.mcp.state()

    async def aclose(self) -> None:
        try:
            await self.mcp.aclose()
        finally:
            try:
                await self.runner.aclose()
            finally:
                await self.http.aclose()
