"""A fake Ollama that also speaks the native API: /api/chat, /api/version, /api/ps.

Extends `FakeOllama` (which keeps its /v1 behaviour) with the native shapes of
docs/backends.md 1a-1c, 1e, R2, R4, R7: NDJSON lines ending in `\\n`, whole tool calls
with `arguments` as objects on a `done:false` line (or, with
`variant="llama_server"`, all on the `done:true` line with 32-character ids),
`done_reason`, token counts on the last line, `{"error": ...}` errors.

It models the context window the way the runner does: a model loads with
`options.num_ctx` when a request gives one (and reloads when it differs), else
with `default_ctx`; a rendered prompt (tools, then messages) longer than the window
loses its front, and with it the tool definitions, and the model then answers as if
it had no tools. Tokens are characters / 4.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from support.fake_ollama import FakeOllama, Reply, _tagged, go_json, qualified_name

NATIVE_JSON = "application/json; charset=utf-8"
CREATED_AT = "2025-07-07T20:22:19.184789Z"
BLIND_ANSWER = "I have no tools to call."
CHARS_PER_TOKEN = 4


@dataclass
class NativeReply(Reply):
    thinking: list[str] = field(default_factory=list)
    error_after: int | None = None
    """send an `{"error": ...}` line after this many lines (a mid-stream failure)."""
    garbage_after: int | None = None
    """send a line that is not JSON after this many lines (a broken upstream, not Ollama)."""


@dataclass
class Loaded:
    num_ctx: int
    explicit: bool
    """loaded with a num_ctx a request asked for (a request without one reloads it)."""


class FakeOllamaNative(FakeOllama):
    def __init__(self, *, version: str = "0.33.0", default_ctx: int = 4096,
                 variant: str = "go") -> None:
        super().__init__()
        self.version = version
        self.default_ctx = default_ctx
        self.variant = variant
        self.max_ctx: dict[str, int] = {}
        self.loaded: dict[str, Loaded] = {}
        self.loads = 0
        self.options: list[dict[str, Any]] = []
        """`options` of every native chat request, in order."""
        self.truncated: list[bool] = []
        """per chat request (either API): whether the prompt lost its front."""
        self.app.router.routes.extend([
            Route("/api/chat", self._native_chat, methods=["POST"]),
            Route("/api/ps", self._ps, methods=["GET"]),
        ])

    def add_model(self, name: str, *, tools: bool = True, show: bool = True,
                  max_ctx: int = 131072) -> None:
        super().add_model(name, tools=tools, show=show)
        self.max_ctx[_tagged(name)] = max_ctx

    def native_requests(self) -> list[dict[str, Any]]:
        return [r for r, p in zip(self.requests, self.paths) if p == "/api/chat"]

    # --- the runner's window ---------------------------------------------------

    def _window(self, model: str, num_ctx: Any) -> int:
        current = self.loaded.get(model)
        if isinstance(num_ctx, int):
            if current is None or current.num_ctx != num_ctx or not current.explicit:
                self.loaded[model] = Loaded(num_ctx, True)
                self.loads += 1
        elif current is None or current.explicit:
            self.loaded[model] = Loaded(self.default_ctx, False)
            self.loads += 1
        return self.loaded[model].num_ctx

    def _prompt_tokens(self, body: dict[str, Any]) -> int:
        text = orjson.dumps(body.get("tools") or []).decode()
        for message in body.get("messages") or []:
            content = message.get("content")
            text += f"{message.get('role')}: {content if isinstance(content, str) else ''}\n"
            if message.get("tool_calls"):
                text += orjson.dumps(message["tool_calls"]).decode()
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    def _sees_tools(self, model: str, body: dict[str, Any], num_ctx: Any) -> tuple[bool, int]:
        """Whether the tool definitions survived, and the prompt tokens evaluated."""
        window = self._window(model, num_ctx)
        tokens = self._prompt_tokens(body)
        cut = tokens > window
        with self.lock:
            self.truncated.append(cut)
        return not cut, min(tokens, window)

    # --- /v1 keeps FakeOllama's shapes, but the window applies there too --------

    async def _chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        model = _tagged(body.get("model", ""))
        if model in self.models and not (body.get("tools") and not self.models[model]["tools"]):
            sees, _ = self._sees_tools(model, body, None)
            queue = self.replies.get(model)
            if not sees and queue and queue[0].tool_calls:
                queue.insert(0, Reply(content=[BLIND_ANSWER]))
        return await super()._chat(request)

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        """Ollama's /v1 usage.prompt_tokens is the runner's prompt_eval_count: the
        prompt's tokens, or the window when it was cut (_sees_tools loaded it)."""
        loaded = self.loaded.get(_tagged(body.get("model", "")))
        tokens = self._prompt_tokens(body)
        return min(tokens, loaded.num_ctx) if loaded is not None else tokens

    # --- native endpoints ------------------------------------------------------

    async def _version(self, request: Request) -> Response:
        self._record(request, {})
        return Response(go_json({"version": self.version}), media_type=NATIVE_JSON)

    async def _ps(self, request: Request) -> Response:
        self._record(request, {})
        models = [{"name": name, "model": name, "size": 1, "digest": "0" * 64,
                   "details": {"format": "gguf", "family": "fake"},
                   "expires_at": "2026-11-24T10:05:00Z", "size_vram": 1,
                   "context_length": state.num_ctx}
                  for name, state in self.loaded.items()]
        return Response(go_json({"models": models}), media_type=NATIVE_JSON)

    async def _show(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self._record(request, body)
        name = _tagged(body.get("model") or body.get("name") or "")
        info = self.models.get(name)
        if info is None or not info["show"]:
            return _native_error(404, f"model '{name}' not found")
        caps = ["completion", "tools", "thinking"] if info["tools"] else ["completion"]
        return Response(go_json({
            "modelfile": "", "parameters": "stop \"<|im_end|>\"", "template": "",
            "details": {"family": "fake"}, "capabilities": caps,
            "model_info": {"general.architecture": "fake",
                           "fake.context_length": self.max_ctx.get(name, 131072)}}),
            media_type=NATIVE_JSON)

    async def _native_chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self._record(request, body)
        options = body.get("options") or {}
        with self.lock:
            self.options.append(options)
        model = _tagged(body.get("model", ""))
        if model not in self.models:
            return _native_error(404, f"model '{body.get('model')}' not found")
        if body.get("tools") and not self.models[model]["tools"]:
            return _native_error(400, f"{qualified_name(model)} does not support tools")
        sees, prompt_tokens = self._sees_tools(model, body, options.get("num_ctx"))
        queue = self.replies.get(model) or [NativeReply(content=["Hello", " from ", model])]
        reply = queue.pop(0) if len(queue) > 1 else queue[0]
        if reply.status != 200 or reply.body is not None:
            return Response(reply.body or b"", status_code=reply.status,
                            media_type=reply.content_type)
        if isinstance(reply, NativeReply) and reply.error_after == 0:
            # Nothing written yet: Ollama answers with a status, not an NDJSON error line.
            return _native_error(500, "an error was encountered while running the model")
        if not sees and reply.tool_calls:
            reply = NativeReply(content=[BLIND_ANSWER])
        lines = self._lines(body["model"], reply, prompt_tokens)
        if body.get("stream", True):
            return StreamingResponse(self._paced(lines, reply), media_type="application/x-ndjson")
        return Response(go_json(self._whole(body["model"], reply, prompt_tokens)),
                        media_type=NATIVE_JSON)

    def _lines(self, model: str, reply: Reply, prompt_tokens: int) -> list[bytes]:
        thinking = reply.thinking if isinstance(reply, NativeReply) else []
        messages: list[dict[str, Any]] = [{"role": "assistant", "content": "", "thinking": t}
                                          for t in thinking]
        messages += [{"role": "assistant", "content": piece} for piece in reply.content]
        calls = [self._native_call(c, i) for i, c in enumerate(reply.tool_calls)]
        if calls and self.variant != "llama_server":
            messages += [{"role": "assistant", "content": "", "tool_calls": [c]} for c in calls]
        last: dict[str, Any] = {"role": "assistant", "content": ""}
        if calls and self.variant == "llama_server":
            last["tool_calls"] = calls
        lines = [_line({"model": model, "created_at": CREATED_AT, "message": m, "done": False})
                 for m in messages]
        lines.append(_line({"model": model, "created_at": CREATED_AT, "message": last,
                            "done": True, "done_reason": reply.finish, **_metrics(
                                prompt_tokens, len(messages))}))
        if isinstance(reply, NativeReply) and reply.error_after is not None:
            lines = lines[:reply.error_after] + [_line({"error": "an error was encountered "
                                                                "while running the model"})]
        if isinstance(reply, NativeReply) and reply.garbage_after is not None:
            lines = [*lines[:reply.garbage_after], b"<html>502 Bad Gateway</html>\n",
                     *lines[reply.garbage_after:]]
        return lines

    def _whole(self, model: str, reply: Reply, prompt_tokens: int) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(reply.content)}
        thinking = reply.thinking if isinstance(reply, NativeReply) else []
        if thinking:
            message["thinking"] = "".join(thinking)
        if reply.tool_calls:
            message["tool_calls"] = [self._native_call(c, i)
                                     for i, c in enumerate(reply.tool_calls)]
        return {"model": model, "created_at": CREATED_AT, "message": message, "done": True,
                "done_reason": reply.finish, **_metrics(prompt_tokens, 5)}

    def _native_call(self, call: dict[str, Any], index: int) -> dict[str, Any]:
        """A /v1-shaped scripted call in the native shape: arguments as an object."""
        function = call["function"]
        native: dict[str, Any] = {"function": {"index": index, "name": function["name"],
                                               "arguments": orjson.loads(function["arguments"])}}
        if self.variant == "llama_server":
            native["id"] = f"{index:02d}" + "Ab3dE5gH7jK9mN1pQ3sT5vW7yZ1bC3"
        else:
            native["id"] = call["id"]
        return native

    async def _paced(self, lines: list[bytes], reply: Reply) -> AsyncIterator[bytes]:
        try:
            for line in lines:
                yield line
                if reply.delay:
                    await asyncio.sleep(reply.delay)
        except asyncio.CancelledError:
            with self.lock:
                self.abandoned += 1
            raise


def _line(obj: dict[str, Any]) -> bytes:
    return go_json(obj) + b"\n"


def _metrics(prompt_tokens: int, eval_count: int) -> dict[str, int]:
    return {"total_duration": 182242375, "load_duration": 41295167,
            "prompt_eval_count": prompt_tokens, "prompt_eval_duration": 24573166,
            "eval_count": eval_count, "eval_duration": 115959084}


def _native_error(status: int, message: str) -> Response:
    # gin's c.JSON: no trailing newline.
    return Response(go_json({"error": message}), status_code=status, media_type=NATIVE_JSON)
