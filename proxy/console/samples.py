"""The bench's shipped sample tools (OpenAI `tools` entries)."""

from __future__ import annotations

from typing import Any


def _tool(name: str, description: str, properties: dict[str, Any],
          required: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required}}}


_STR = {"type": "string"}

SAMPLE_TOOLS: dict[str, dict[str, Any]] = {
    "weather": _tool("get_weather", "Current weather for a city.", {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"]),
    "search": _tool("web_search", "Search the web and return the top results.", {
        "query": {"type": "string"},
        "max_results": {"type": "integer", "minimum": 1, "maximum": 20}}, ["query"]),
    "read_file": _tool("read_file", "Read a text file from the workspace.", {
        "path": _STR}, ["path"]),
    "write_file": _tool("write_file", "Write a text file in the workspace.", {
        "path": _STR, "content": _STR}, ["path", "content"]),
    "shell": _tool("run_shell", "Run a shell command and return its output.", {
        "command": _STR, "timeout_s": {"type": "number"}}, ["command"]),
    "calculator": _tool("calculate", "Evaluate an arithmetic expression.", {
        "expression": {"type": "string", "description": "e.g. (2+3)*4"}}, ["expression"]),
}
