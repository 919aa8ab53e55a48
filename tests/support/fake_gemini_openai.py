"""A fake of Google's OpenAI-compatible Gemini endpoint (`…/v1beta/openai/chat/completions`),
faithful where toolshim meets it: the Bearer key, and the function-declaration schema
rules. Gemini takes an OpenAPI subset for `parameters` and answers 400 for the rest, in
Google's envelope wrapped in a list as this endpoint sends it:
`[{"error": {"code": 400, "message": "Invalid JSON payload received. Unknown name
\\"additionalProperties\\" at 'tools[0].function_declarations[0].parameters': Cannot find
field.", "status": "INVALID_ARGUMENT"}}]` (quoted in Laisky/one-api#60, bigduu/Bodhi-AI#52,
openswarm-ai/openswarm#24). A type array fails proto parsing ("Proto field is not
repeating, cannot start list"), and a string format other than enum / date-time is refused.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

KNOWN = {"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
         "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
         "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum",
         "maximum"}
FORMATS = {"string": {"enum", "date-time"}, "number": {"float", "double"},
           "integer": {"int32", "int64"}}


def schema_problems(node: Any, at: str) -> list[str]:
    if not isinstance(node, dict):
        return [f"Invalid value at '{at}': a schema must be an object"]
    found = [f"Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find "
             "field." for key in node if key not in KNOWN]
    kind = node.get("type")
    if isinstance(kind, list):
        found.append(f"Invalid JSON payload received. Proto field is not repeating, cannot "
                     f"start list. (at '{at}.type')")
    fmt = node.get("format")
    if fmt is not None and isinstance(kind, str) and fmt not in FORMATS.get(kind, set()):
        found.append(f"* GenerateContentRequest.{at}.format: only {sorted(FORMATS.get(kind, ()))} "
                     f"are supported for {kind.upper()} type")
    for i, (name, sub) in enumerate((node.get("properties") or {}).items()):
        found += schema_problems(sub, f"{at}.properties[{i}].value")
        del name
    if "items" in node:
        found += schema_problems(node["items"], f"{at}.items")
    for i, sub in enumerate(node.get("anyOf") or []):
        found += schema_problems(sub, f"{at}.any_of[{i}]")
    return found


class FakeGeminiOpenAI:
    def __init__(self, key: str) -> None:
        self.key = key
        self.requests: list[dict[str, Any]] = []
        self.app = Starlette(routes=[
            Route("/v1beta/openai/chat/completions", self._chat, methods=["POST"]),
            Route("/v1beta/openai/models", self._models, methods=["GET"])])

    async def _chat(self, request: Request) -> Response:
        if request.headers.get("authorization") != f"Bearer {self.key}":
            return _error(401, "API key not valid. Please pass a valid API key.",
                          "UNAUTHENTICATED")
        body = orjson.loads(await request.body())
        self.requests.append(body)
        problems: list[str] = []
        for i, tool in enumerate(body.get("tools") or []):
            problems += schema_problems(tool["function"].get("parameters", {}),
                                        f"tools[0].function_declarations[{i}].parameters")
        if problems:
            return _error(400, "\n".join(problems), "INVALID_ARGUMENT")
        return Response(orjson.dumps({
            "id": "x", "object": "chat.completion", "created": 1, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "Hello from Gemini"}}],
            "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}}),
            media_type="application/json")

    async def _models(self, request: Request) -> Response:
        # Google lists ids with the resource prefix (`models/gemini-2.5-flash`).
        return Response(orjson.dumps({"object": "list", "data": [
            {"id": f"models/{name}", "object": "model", "owned_by": "google"}
            for name in ("gemini-2.5-flash", "other-model")]}),
            media_type="application/json")


def _error(code: int, message: str, status: str) -> Response:
    return Response(orjson.dumps([{"error": {"code": code, "message": message,
                                             "status": status}}]),
                    status_code=code, media_type="application/json")
