"""The chat dialect's request: a /v1/chat/completions body parsed and checked.

The body stays the client's own dict (unknown fields pass through to the
backend untouched); pydantic only checks the parts toolshim relies on, so a
wrong type is a 400 naming the field instead of a crash three stages later.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

import orjson
from pydantic import ConfigDict, Field, StrictBool, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic needs this one below Python 3.12

from proxy.api.body import check_tool_refs, check_walkable
from proxy.api.hostile import MAX_EXPANDED
from proxy.errors import ApiError, check_model_name
from proxy.nesting import MAX_DEPTH, containers_at_most
from proxy.types import ChatRequest

# TypedDicts, not models: the result is thrown away (the body stays the client's
# dict), and pydantic checks a TypedDict in half the time it takes to build models
# (bench/README.md). Unknown fields are allowed.
_OPEN = ConfigDict(extra="allow")


@with_config(_OPEN)
class _Function(TypedDict):
    name: Annotated[str, Field(min_length=1, max_length=256)]
    description: NotRequired[str | None]
    parameters: NotRequired[dict[str, Any] | None]


@with_config(_OPEN)
class _Tool(TypedDict):
    type: NotRequired[Literal["function"]]
    function: _Function


@with_config(_OPEN)
class _Message(TypedDict):
    role: str
    content: NotRequired[str | list[Any] | None]
    tool_calls: NotRequired[list[dict[str, Any]] | None]


@with_config(_OPEN)
class _ChatBody(TypedDict):
    model: Annotated[str, Field(min_length=1)]
    messages: Annotated[list[_Message], Field(min_length=1)]
    # "false" (a string) must not start a stream: booleans are strict.
    stream: NotRequired[StrictBool | None]
    tools: NotRequired[list[_Tool] | None]
    tool_choice: NotRequired[str | dict[str, Any] | None]
    parallel_tool_calls: NotRequired[StrictBool | None]
    stream_options: NotRequired[dict[str, Any] | None]


_CHAT_BODY = TypeAdapter(_ChatBody)


def parse_chat_request(raw: bytes) -> ChatRequest:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(body, dict):
        raise ApiError(400, "invalid request: the body must be a JSON object", code="invalid_request")
    brackets = containers_at_most(raw)  # one count for both bounds below
    if brackets > MAX_DEPTH:
        check_walkable(body)
    try:
        _CHAT_BODY.validate_python(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "body"
        raise ApiError(400, f"invalid chat request: {where}: {err['msg']}", param=where,
                       code="invalid_request") from None
    check_model_name(body["model"])
    # A `$ref` needs a '$' (plain or escaped), and growing past the expansion budget
    # needs that many containers: otherwise neither tool-schema check can fire.
    if raw.find(b"$") >= 0 or raw.find(b"\\u0024") >= 0 or brackets > MAX_EXPANDED:
        check_tool_refs(body)
    return body
