"""A fake llama-cpp-python 0.3.x server (chat format chatml-function-calling), over real HTTP.

Faithful to exchanges recorded from the real server (docs/real-backend.md lists
its quirks): JSON with spaces after separators in streams, first delta
`{"role": "assistant"}`, finish delta `{}`; `stream_options.include_usage`
ignored; tools with `"auto"` answer native calls whole (plus a legacy
`function_call` whose name ends in ':') but streamed they get a 200 event
stream with no event at all; `"required"` is a 500 with an empty message (and an
empty 200 stream when streamed); a named function works and, streamed, repeats
`id` and `name` in every argument fragment; tools without tool_choice (or
`"none"`) are ignored; an assistant turn with `content: null` is a 500 with
pydantic's text and a server traceback; an unknown model is answered by the
default model.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

T = 1795509800
MODEL = "smollm2-135m-instruct"
SSE_HEADERS = {"cache-control": "no-store", "x-accel-buffering": "no"}
NULL_CONTENT_ERROR = (
    "7 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, "
    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid "
    "string', 'input': None}\n\n  File \"<site-packages>/llama_cpp/server/app.py\", line 376, "
    "in create_chat_completion\n    POST /v1/chat/completions"
)

BAD_ROLE_ERROR = (
    "7 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 0, "
    "'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be 'system'\", "
    "'input': 'wizard'}\n\n  File \"<site-packages>/llama_cpp/server/app.py\", line 376, in "
    "create_chat_completion\n    POST /v1/chat/completions"
)
ROLES = ("system", "user", "assistant", "tool", "function")


class FakeLlamaCpp:
    def __init__(self, models: tuple[str, ...] = (MODEL, "gemma-3-270m")) -> None:
        self.models = models
        self.text = "The weather in Paris is mild."
        self.arguments = '{ "city": "Paris" }'
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._list, methods=["GET"]),
        ])

    async def _list(self, request: Request) -> Response:
        data = [{"id": m, "object": "model", "owned_by": "me", "permissions": []}
                for m in self.models]
        return Response(orjson.dumps({"object": "list", "data": data}),
                        media_type="application/json")

    async def _chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        with self.lock:
            self.requests.append(body)
        messages = body.get("messages") or []
        if any(_null_call_turn(m) for m in messages):
            return _error(500, NULL_CONTENT_ERROR)
        if any(m.get("role") not in ROLES for m in messages):
            return _error(500, BAD_ROLE_ERROR)
        choice = body.get("tool_choice")
        tools = body.get("tools") or []
        named = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        if named is not None and named not in [t["function"]["name"] for t in tools]:
            return _error(500, f"Tool with name '{named}' not found in tools")
        stream = bool(body.get("stream"))
        if tools and choice in ("auto", "required") and stream:
            return StreamingResponse(_nothing(), media_type="text/event-stream",
                                     headers=SSE_HEADERS)
        if tools and choice == "required":
            return _error(500, "")
        calls = bool(tools) and (choice == "auto" or named is not None)
        name = named or (tools[0]["function"]["name"] if tools else "")
        model = body.get("model") or "/models/SmolLM2-135M-Instruct.Q4_1.gguf"
        if stream:
            frames = self._named_frames(model, name) if calls else self._text_frames(model)
            return StreamingResponse(_iterate(frames), media_type="text/event-stream",
                                     headers=SSE_HEADERS)
        message: dict[str, Any] = {"content": self.text, "role": "assistant"}
        if calls:
            message = {"content": None, "tool_calls": [{
                "id": f"call__0_{name}_cmpl-ea2d", "type": "function",
                "function": {"name": name, "arguments": self.arguments}}], "role": "assistant",
                "function_call": {"name": name + ("" if named else ":"),
                                  "arguments": self.arguments}}
        return Response(orjson.dumps({
            "id": "chatcmpl-f886", "object": "chat.completion", "created": T, "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 23, "completion_tokens": 8, "total_tokens": 31}}),
            media_type="application/json")

    def _text_frames(self, model: str) -> list[bytes]:
        base = {"id": "chatcmpl-9c66", "model": model, "created": T,
                "object": "chat.completion.chunk"}
        deltas: list[dict[str, Any]] = [{"role": "assistant"}]
        deltas += [{"content": w} for w in _words(self.text)]
        frames = [_frame({**base, "choices": [{"index": 0, "delta": d, "logprobs": None,
                                               "finish_reason": None}]}) for d in deltas]
        frames.append(_frame({**base, "choices": [{"index": 0, "delta": {}, "logprobs": None,
                                                   "finish_reason": "stop"}]}))
        return [*frames, b"data: [DONE]\n\n"]

    def _named_frames(self, model: str, name: str) -> list[bytes]:
        base = {"id": "chatcmpl-a45c", "object": "chat.completion.chunk", "created": T,
                "model": model}
        call_id = f"call__0_{name}_cmpl-a45c"
        empty = {"role": None, "content": None, "function_call": None, "tool_calls": None}
        frames = [_frame({**base, "choices": [{"index": 0, "finish_reason": None,
                                               "logprobs": None,
                                               "delta": {**empty, "role": "assistant"}}]})]
        for piece in _words(self.arguments):
            delta = {**empty, "function_call": {"name": name, "arguments": piece},
                     "tool_calls": [{"index": 0, "id": call_id, "type": "function",
                                     "function": {"name": name, "arguments": piece}}]}
            frames.append(_frame({**base, "choices": [{"index": 0, "finish_reason": None,
                                                       "logprobs": None, "delta": delta}]}))
        frames.append(_frame({**base, "choices": [{"index": 0, "finish_reason": "tool_calls",
                                                   "logprobs": None, "delta": empty}]}))
        return [*frames, b"data: [DONE]\n\n"]


def _null_call_turn(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant" \
        and message.get("content") is None and bool(message.get("tool_calls"))


def _words(text: str) -> list[str]:
    """Token-like pieces: a word with its leading space."""
    out: list[str] = []
    for i, word in enumerate(text.split(" ")):
        out.append(word if i == 0 else " " + word)
    return out


def _frame(obj: dict[str, Any]) -> bytes:
    # The server's sse-starlette framing: json.dumps with its default separators.
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def _nothing() -> Any:
    return
    yield b""


async def _iterate(frames: list[bytes]) -> Any:
    for frame in frames:
        yield frame


def _error(status: int, message: str) -> Response:
    return Response(orjson.dumps({"error": {"message": message, "type": "internal_server_error",
                                            "param": None, "code": None}}),
                    status_code=status, media_type="application/json")
