"""A fake Ollama, faithful to docs/backends.md, driven over real HTTP.

Statuses, error bodies, content types and stream framing are Ollama's
(>= v0.32.6 by default; `legacy=True` gives the v0.5.12-v0.32.5 shape). Tests
script what a model answers with `reply(model, ...)`; everything the fake
receives is recorded, and streams the client abandoned are counted.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

T = 1755000000


@dataclass
class Reply:
    """What the fake model says: content pieces and/or whole tool calls."""

    content: list[str] = field(default_factory=list)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    """Ollama /v1 shape: {"id","index","type","function":{"name","arguments": <json str>}}."""
    finish: str = "stop"
    delay: float = 0.0
    """seconds between stream events."""
    raw_events: list[bytes] | None = None
    """exact SSE bytes to send instead (garbage, resets, vLLM deltas)."""
    reset_after: int | None = None
    """close the connection abruptly after this many events."""
    load: float = 0.0
    """seconds before the answer's headers, as Ollama loading a model sends nothing."""
    status: int = 200
    body: bytes | None = None
    content_type: str = "application/json"


def tool_call(name: str, arguments: Any, call_id: str = "call_k3x9a0qz", index: int = 0
              ) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else orjson.dumps(arguments).decode()
    return {"id": call_id, "index": index, "type": "function",
            "function": {"name": name, "arguments": args}}


def go_json(obj: Any) -> bytes:
    """JSON as Ollama's Go encoder writes it: compact, with `<`, `>` and `&` escaped
    (`\\u003c`, `\\u003e`, `\\u0026`: encoding/json's HTML-safe default), and U+2028 and
    U+2029 too, as encoding/json always does. Outside strings JSON has none of these, so
    replacing them in orjson's output is exact."""
    return (orjson.dumps(obj).replace(b"<", b"\\u003c").replace(b">", b"\\u003e")
            .replace(b"&", b"\\u0026").replace("\u2028".encode(), b"\\u2028")
            .replace("\u2029".encode(), b"\\u2029"))


def no_tools_body(model: str, legacy: bool = False) -> bytes:
    """R1: 400 for a model whose template has no tools."""
    kind = "api_error" if legacy else "invalid_request_error"
    return go_json({"error": {"message": f"{qualified_name(model)} does not support tools",
                                   "type": kind,
                                   "param": None, "code": None}}) + b"\n"


def _tagged(model: str) -> str:
    return model if ":" in model else model + ":latest"


def qualified_name(model: str) -> str:
    """Ollama's `model.Name.String()` in its errors: host/namespace/model:tag, with the
    defaults (registry.ollama.ai, library, latest) filled in."""
    parts = _tagged(model).split("/")
    defaults = ["registry.ollama.ai", "library"][: max(0, 3 - len(parts))]
    return "/".join([*defaults, *parts])


class FakeOllama:
    def __init__(self, *, legacy: bool = False) -> None:
        self.legacy = legacy
        self.version = "0.5.12" if legacy else "0.33.0"
        self.models: dict[str, dict[str, Any]] = {}
        self.replies: dict[str, list[Reply]] = {}
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.abandoned = 0
        self.api_key: str | None = None
        """set: every endpoint wants `Authorization: Bearer <api_key>` and otherwise
        answers 401 repeating the Authorization and X-Api-Key it got (`_denied`)."""
        self.script: Callable[[dict[str, Any]], Reply] | None = None
        """set: every chat answer is played from the request by this function."""
        self.lock = threading.Lock()
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._list, methods=["GET"]),
            Route("/api/show", self._show, methods=["POST"]),
            Route("/api/version", self._version, methods=["GET"]),
            Route("/v1/embeddings", self._embeddings, methods=["POST"]),
        ])

    # --- scripting -----------------------------------------------------------

    def add_model(self, name: str, *, tools: bool = True, show: bool = True) -> None:
        self.models[_tagged(name)] = {"tools": tools, "show": show}

    def reply(self, model: str, reply: Reply) -> None:
        """Queue an answer for the next request to `model` (the last one repeats)."""
        self.replies.setdefault(_tagged(model), []).append(reply)

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r for r, p in zip(self.requests, self.paths) if p == "/v1/chat/completions"]

    # --- endpoints -------------------------------------------------------------

    async def _chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self._record(request, body)
        if (denied := self._denied(request)) is not None:
            return denied
        model = _tagged(body.get("model", ""))
        if model not in self.models:
            return _v1_error(404, f"model '{body.get('model')}' not found", self.legacy)
        if body.get("tools") and not self.models[model]["tools"]:
            return Response(no_tools_body(body["model"], self.legacy), status_code=400,
                            media_type="application/json")
        if self.script is not None:
            reply = self.script(body)
        else:
            queue = self.replies.get(model) or [Reply(content=["Hello", " from ", model])]
            reply = queue.pop(0) if len(queue) > 1 else queue[0]
        if reply.load:
            await asyncio.sleep(reply.load)
        if reply.status != 200 or reply.body is not None:
            return Response(reply.body or b"", status_code=reply.status,
                            media_type=reply.content_type)
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            # Exactly `text/event-stream` (Go's header; media_type would add a charset).
            return StreamingResponse(self._events(model, reply, include_usage,
                                                  self.prompt_tokens(body)),
                                     headers={"content-type": "text/event-stream"})
        if reply.delay and await self._client_left(request, reply.delay):
            return Response(b"", status_code=499)
        return Response(go_json(self._completion(model, reply, self.prompt_tokens(body))) + b"\n",
                        media_type="application/json")

    async def _client_left(self, request: Request, delay: float) -> bool:
        """Think for `delay` seconds like a slow model; notice a caller that hangs up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        while loop.time() < deadline:
            if await request.is_disconnected():
                with self.lock:
                    self.abandoned += 1
                return True
            await asyncio.sleep(0.02)
        return False

    def _denied(self, request: Request) -> Response | None:
        """Ollama itself checks no key; llama.cpp's server with --api-key answers a wrong
        one 401 in its error envelope (code, message, type). This one also repeats the
        credentials it got, as a debugging gateway in front may: what toolshim must
        never show a client."""
        if self.api_key is None or \
                request.headers.get("authorization") == f"Bearer {self.api_key}":
            return None
        got = [request.headers.get("authorization", ""), request.headers.get("x-api-key", "")]
        return Response(orjson.dumps({"error": {
            "code": 401, "message": "bad key: " + " / ".join(got),
            "type": "authentication_error"}}),
            status_code=401, media_type="application/json; charset=utf-8")

    def _record(self, request: Request, body: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(body)
            self.headers.append(dict(request.headers))
            self.paths.append(request.url.path)

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        """What the answer's usage says the prompt took (a subclass counts it)."""
        return 12

    def _completion(self, model: str, reply: Reply, prompt: int = 12) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.content)}
        finish = reply.finish
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
            # tool_calls only after a natural stop since v0.32.6; always before (legacy)
            finish = "tool_calls" if finish == "stop" or self.legacy else finish
        return {"id": "chatcmpl-88", "object": "chat.completion", "created": T, "model": model,
                "system_fingerprint": "fp_ollama",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 5,
                          "total_tokens": prompt + 5}}

    async def _events(self, model: str, reply: Reply, include_usage: bool, prompt: int = 12
                      ) -> AsyncIterator[bytes]:
        events = reply.raw_events if reply.raw_events is not None else \
            self._frames(model, reply, include_usage, prompt)
        sent = 0
        try:
            for event in events:
                if reply.reset_after is not None and sent >= reply.reset_after:
                    raise ConnectionResetError("fake upstream resets the connection")
                yield event
                sent += 1
                if reply.delay:
                    await asyncio.sleep(reply.delay)
        except asyncio.CancelledError:
            with self.lock:
                self.abandoned += 1
            raise

    def _frames(self, model: str, reply: Reply, include_usage: bool, prompt: int = 12
                ) -> list[bytes]:
        base = {"id": "chatcmpl-527", "object": "chat.completion.chunk", "created": T,
                "model": model, "system_fingerprint": "fp_ollama"}
        deltas: list[dict[str, Any]] = []
        for i, piece in enumerate(reply.content):
            delta: dict[str, Any] = {"content": piece}
            if i == 0 or self.legacy:
                delta = {"role": "assistant", **delta}
            deltas.append(delta)
        for call in reply.tool_calls:
            delta = {"content": "", "tool_calls": [call]}
            if not deltas or self.legacy:
                delta = {"role": "assistant", **delta}
            deltas.append(delta)
        frames = [_frame({**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]})
                  for d in deltas]
        finish = reply.finish
        if reply.tool_calls and (finish == "stop" or self.legacy):
            finish = "tool_calls"
        last_delta: dict[str, Any] = {"role": "assistant", "content": ""} if self.legacy else {}
        frames.append(_frame({**base, "choices": [{"index": 0, "delta": last_delta,
                                                   "finish_reason": finish}]}))
        if include_usage:
            frames.append(_frame({**base, "choices": [], "usage": {
                "prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5}}))
        frames.append(b"data: [DONE]\n\n")
        return frames

    async def _list(self, request: Request) -> Response:
        self._record(request, {})
        if (denied := self._denied(request)) is not None:
            return denied
        data = [{"id": name, "object": "model", "created": T, "owned_by": "library"}
                for name in self.models] or None
        return Response(go_json({"object": "list", "data": data}) + b"\n",  # Encoder.Encode
                        media_type="application/json")

    async def _version(self, request: Request) -> Response:
        # Not recorded: start-up asks it in the background, and tests read the last
        # request's headers (the native fake, which tests count it on, records it).
        return Response(go_json({"version": self.version}),
                        media_type="application/json; charset=utf-8")  # gin c.JSON

    async def _show(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self._record(request, body)
        if (denied := self._denied(request)) is not None:
            return denied
        name = _tagged(body.get("model") or body.get("name") or "")
        info = self.models.get(name)
        if info is None or not info["show"]:
            return Response(go_json({"error": f"model '{name}' not found"}),
                            status_code=404, media_type="application/json; charset=utf-8")
        caps = ["completion", "tools"] if info["tools"] else ["completion"]
        return Response(go_json({"modelfile": "", "parameters": "", "template": "",
                                      "details": {"family": "fake"}, "model_info": {},
                                      "capabilities": caps}),
                        media_type="application/json; charset=utf-8")

    async def _embeddings(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self._record(request, body)
        if (denied := self._denied(request)) is not None:
            return denied
        return Response(go_json({"object": "list", "model": body.get("model"), "data": [
            {"object": "embedding", "index": 0, "embedding": [0.1, 0.2, 0.3]}]}) + b"\n",
            media_type="application/json")


def _frame(obj: dict[str, Any]) -> bytes:
    return b"data: " + go_json(obj) + b"\n\n"


def _v1_error(status: int, message: str, legacy: bool) -> Response:
    kind = "api_error" if legacy else {400: "invalid_request_error",
                                       404: "not_found_error"}.get(status, "api_error")
    return Response(go_json({"error": {"message": message, "type": kind, "param": None,
                                            "code": None}}) + b"\n",
                    status_code=status, media_type="application/json")


