"""Which server tools a model is offered, and running the calls it makes to them.

Owns: the table of offered server tools (configured ones plus every ready
MCP server's), matching a model's `server_tools:` names and globs against
it, running calls (several at once) with the per-tool timeout, capping each
result and turning every failure into a result the model can read.
Must not: raise for anything a tool or a model does wrong, or log arguments
and results (the flow decides that, under --log-prompts).
"""

from __future__ import annotations

import asyncio
import fnmatch
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson

from proxy.capabilities.server_tools import BuiltinTool, HttpTool, McpTool, MockTool
from proxy.server_tools.http_tool import run_http
from proxy.server_tools.local import BUILTIN_PARAMETERS, ToolError, run_mock
from proxy.server_tools.mcp_servers import McpServers
from proxy.server_tools.sandbox import Sandbox

Definition = MockTool | BuiltinTool | HttpTool | McpTool
_TRUNCATED = "\n[result truncated by toolshim]"


@dataclass(frozen=True)
class ToolOutcome:
    """One server-tool call, done: what the model reads and what the log says."""

    call_id: str
    name: str
    ok: bool
    content: str
    """the `tool` message content: the result, or `{"error": "..."}`."""
    duration_ms: float
    error: str | None = None


class ServerTools:
    def __init__(self, definitions: Mapping[str, Definition], mcp: McpServers,
                 http: httpx.AsyncClient, sandbox: Sandbox | None = None) -> None:
        self.definitions = dict(definitions)
        self.mcp = mcp
        self.http = http
        self.sandbox = sandbox or Sandbox()
        """where every builtin runs: off the event loop, killed at its timeout."""

    async def aclose(self) -> None:
        await self.sandbox.aclose()

    def offered(self, patterns: Sequence[str]) -> list[dict[str, Any]]:
        """OpenAI tool definitions for every server tool a pattern selects, in name order."""
        table = self._table()
        chosen = sorted(name for name in table
                        if any(fnmatch.fnmatchcase(name, p) for p in patterns))
        return [table[name] for name in chosen]

    def _table(self) -> dict[str, dict[str, Any]]:
        table: dict[str, dict[str, Any]] = {}
        for name, spec in self.definitions.items():
            if isinstance(spec, McpTool):
                continue  # its tools come from the server, under entry__tool
            params = spec.parameters
            if isinstance(spec, BuiltinTool) and "parameters" not in spec.model_fields_set:
                params = BUILTIN_PARAMETERS[spec.builtin]
            table[name] = _function(name, spec.description, params)
        for name, tool in self.mcp.tools().items():
            table[name] = _function(name, tool.description, tool.parameters)
        return table

    async def run_all(self, calls: Sequence[Mapping[str, Any]]) -> list[ToolOutcome]:
        """Run a turn's calls concurrently; outcomes in the calls' order."""
        return list(await asyncio.gather(*(self.run(call) for call in calls)))

    async def run(self, call: Mapping[str, Any]) -> ToolOutcome:
        function = call.get("function") or {}
        name, call_id = str(function.get("name", "")), str(call.get("id", ""))
        started = time.perf_counter()
        try:
            arguments = _arguments(function.get("arguments"))
            text = await asyncio.wait_for(self._dispatch(name, arguments), self._timeout(name))
            ok, error = True, None
        except TimeoutError:
            ok, error = False, f"the tool did not answer within {self._timeout(name):g} s"
        except ToolError as exc:
            ok, error = False, str(exc)
        except Exception as exc:  # noqa: BLE001 - a tool bug: the model still gets an answer
            ok, error = False, f"the tool failed ({exc.__class__.__name__})"
        duration = (time.perf_counter() - started) * 1000
        content = text if ok else orjson.dumps({"error": error}).decode()
        return ToolOutcome(call_id, name, ok, self._capped(name, content), duration, error)

    async def _dispatch(self, name: str, arguments: dict[str, Any]) -> str:
        spec = self.definitions.get(name)
        if isinstance(spec, MockTool):
            return run_mock(spec, arguments)
        if isinstance(spec, BuiltinTool):
            return await self.sandbox.run(spec.builtin, arguments, spec.timeout)
        if isinstance(spec, HttpTool):
            return await run_http(spec, arguments, self.http)
        return await self.mcp.call(name, arguments)

    def _spec_of(self, name: str) -> Definition | None:
        spec = self.definitions.get(name)
        if spec is None and "__" in name:
            spec = self.definitions.get(name.split("__", 1)[0])
        return spec

    def _timeout(self, name: str) -> float:
        spec = self._spec_of(name)
        return spec.timeout if spec is not None else 10.0

    def _capped(self, name: str, content: str) -> str:
        spec = self._spec_of(name)
        cap = spec.max_result_bytes if spec is not None else 16_384
        raw = content.encode()
        if len(raw) <= cap:
            return content
        return raw[:cap].decode(errors="ignore") + _TRUNCATED


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description,
                                             "parameters": parameters}}


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = orjson.loads(raw or "{}")
    except (orjson.JSONDecodeError, TypeError):
        raise ToolError("the arguments are not valid JSON") from None
    if not isinstance(value, dict):
        raise ToolError("the arguments must be a JSON object")
    return value
