"""A client's request body read and checked before any door's own parsing.

Every door reads through `read_body` (bounded in bytes, 408/499 on a body that
stops) and parses through `load_body` (JSON, and the nesting bound); a request
translated to chat form has its tool schemas checked by `check_tool_refs`.
Must not: know any dialect's fields.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request

from proxy.api.hostile import MAX_EXPANDED, expansion_exceeds, ref_cycle
from proxy.asgi.client_timeouts import TIMED_OUT
from proxy.errors import ApiError
from proxy.nesting import MAX_DEPTH, containers_at_most, depth_exceeds
from proxy.types import ChatRequest


async def read_body(request: Request, limit: int) -> bytes:
    """Read the body, refusing early (Content-Length) or as soon as it passes `limit`."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    # ASGI messages read here, not through Request.stream(): an async generator per
    # request costs its creation and the loop's bookkeeping of it, for one message.
    chunks: list[bytes] = []
    size = 0
    receive = request.receive
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            if request.scope.get("state", {}).get(TIMED_OUT):
                raise ApiError(408, "request body not received in time", type_="timeout_error",
                               code="client_timeout", headers={"connection": "close"})
            raise ApiError(499, "client closed the connection mid-body", code="client_closed")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _too_large(limit: int) -> ApiError:
    # Named as the operator sets it: the client's reader may be the one who runs toolshim.
    return ApiError(413, f"request body is larger than the limit of {limit} bytes "
                    "(--max-body-bytes / TOOLSHIM_MAX_BODY_BYTES)", code="request_too_large")


def load_body(raw: bytes, invalid: str = "request body is not valid JSON") -> object:
    """A door's body parsed, and refused (400) when it is not JSON or nests too deep:
    the walk runs only when the body holds enough brackets to nest that far."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"{invalid}: {exc}", code="invalid_json") from None
    if containers_at_most(raw) > MAX_DEPTH:
        check_walkable(body)
    return body


def check_walkable(body: object) -> None:
    """Refuse nesting every later recursive walk (and orjson.dumps) would choke on."""
    if depth_exceeds(body):
        raise ApiError(400, f"invalid request: JSON nested deeper than {MAX_DEPTH} levels",
                       code="too_deeply_nested")


def check_tool_refs(body: ChatRequest) -> None:
    for index, tool in enumerate(body.get("tools") or []):
        parameters = tool["function"].get("parameters")
        name = tool["function"]["name"]
        cycle = ref_cycle(parameters)
        if cycle:
            raise ApiError(400, f"invalid tool {name!r}: its parameters schema has a $ref "
                           f"cycle that never ends: {cycle}", param=f"tools.{index}",
                           code="invalid_tool_schema")
        if expansion_exceeds(parameters):
            raise ApiError(400, f"invalid tool {name!r}: its parameters schema grows past "
                           f"{MAX_EXPANDED} nodes once its $refs are expanded",
                           param=f"tools.{index}", code="invalid_tool_schema")
