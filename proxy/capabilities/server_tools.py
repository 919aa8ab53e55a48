"""The `server_tools:` section of capabilities.yaml: tools toolshim runs itself.

Owns validation of each definition (one pydantic model per `kind`), so a
typo is an error with its YAML line like every other key. Must not: start
processes, open connections or read secrets (the kinds do that when a tool
runs; `${ENV}` references stay references here and in every view of the file).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""OpenAI's rule for function names; a server tool's name is offered as one."""

Schema = dict[str, Any]


class _Definition(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    description: str = ""
    parameters: Schema = Field(default_factory=lambda: {"type": "object", "properties": {}})
    timeout: Annotated[float, Field(gt=0, le=600)] = 10.0
    """seconds one call may take."""
    max_result_bytes: Annotated[int, Field(gt=0, le=10_000_000)] = 16_384
    """a result is cut to this size before the model sees it."""

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, value: Schema) -> Schema:
        if value.get("type", "object") != "object":
            raise ValueError("parameters must be a JSON schema of type object")
        return value


class MockResult(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    arguments: dict[str, Any]
    """the call's arguments that select this result (every key must be equal)."""
    result: Any


class MockTool(_Definition):
    kind: Literal["mock"]
    result: Any = None
    """the answer when no row of `results` matches."""
    results: list[MockResult] = []


class BuiltinTool(_Definition):
    kind: Literal["builtin"]
    builtin: Literal["calculator", "current_time", "echo"]


class HttpTool(_Definition):
    kind: Literal["http"]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "GET"
    url: str
    """`{argument}` placeholders are filled in, URL-escaped."""
    headers: dict[str, str] = {}
    """values may hold `${ENV_NAME}`, read from the environment when the tool runs."""
    allowed_hosts: Annotated[list[str], Field(min_length=1)]
    retries: Annotated[int, Field(ge=0, le=5)] = 1
    backoff: Annotated[float, Field(ge=0, le=30)] = 0.5
    result: str | None = None
    """a selector into the JSON answer: `$.data.items[0].name`; None keeps it whole."""

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return value


class McpTool(_Definition):
    kind: Literal["mcp"]
    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    """the whole environment of a stdio server; values may hold `${ENV_NAME}`."""
    url: str | None = None
    """a streamable HTTP server instead of a command."""
    headers: dict[str, str] = {}
    include: list[str] = []
    """globs over the server's tool names; empty: all of them."""
    exclude: list[str] = []

    @field_validator("url")
    @classmethod
    def _one_transport(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return value

    @model_validator(mode="after")
    def _command_or_url(self) -> McpTool:
        if (self.command is None) == (self.url is None):
            raise ValueError("an mcp tool needs exactly one of command (stdio) or url (http)")
        return self


SERVER_TOOL_KINDS = (MockTool, BuiltinTool, HttpTool, McpTool, MockResult)
ServerToolDefinition = Annotated[
    MockTool | BuiltinTool | HttpTool | McpTool, Field(discriminator="kind")
]


def check_tool_name(name: str) -> str:
    if not TOOL_NAME.match(name):
        raise ValueError(f"server tool name {name!r} must match {TOOL_NAME.pattern}")
    if "__" in name:
        raise ValueError(f"server tool name {name!r} may not contain '__' (MCP prefixes use it)")
    return name
