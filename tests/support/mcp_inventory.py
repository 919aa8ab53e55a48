"""A small MCP server over streamable HTTP (the official SDK), for the server-tool tests."""

from __future__ import annotations


def inventory_app() -> object:
    """One tool, `stock(item)`, answering "<item>: 7 in stock"; mount path /mcp."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("inventory")

    @server.tool()
    def stock(item: str) -> str:
        """Stock level of an item."""
        return f"{item}: 7 in stock"

    return server.streamable_http_app()
