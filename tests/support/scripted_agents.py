"""A scripted OpenAI-compatible backend that plays a competent coding model for the
agents tier (tests/agents/), in four behaviours, deciding every answer from the
request alone (the tools offered, or described in the system prompt, and the
conversation so far); nothing is queued ahead.

Behaviours: `native` (a call in `tool_calls`, whole in one chunk as Ollama's /v1 sends it), `hermes` (calls written as
`<tool_call>{json}</tool_call>` text), `qwen3_xml` (Qwen3-Coder's
`<function=...><parameter=...>` text) and `refusing` (any request with `tools` gets
Ollama's exact 400 "does not support tools"; a tool described in the system prompt
is called in Hermes text, as a model following that prompt would).

Two tasks: "Read the file /abs/path ..." (it calls the agent's read tool, then
answers with the token it found in the result) and "Create the file /abs/path
containing exactly: TOKEN" (it calls the agent's write tool, or Codex's
apply_patch, then says it is done). Side requests (titles, memory subagents) get
a plain short answer.
"""

from __future__ import annotations

import re
import threading
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from support.fake_ollama import go_json, no_tools_body

BEHAVIOURS = ("native", "hermes", "qwen3_xml", "refusing")
TOKEN = re.compile(r"\b[a-z]+-\d{3,}-[a-z]+\b")
_READ = re.compile(r"Read the file (/[\w./-]+?)\.?(?:\s|$)")
_CREATE = re.compile(r"Create the file (/[\w./-]+) containing exactly: ([\w-]+)")
_PATH_KEYS = ("filePath", "file_path", "filepath", "absolute_path", "path")
_TEXT_KEYS = ("content", "contents", "text")


class ScriptedAgentModel:
    """The backend app; `requests` records every chat body it was sent."""

    def __init__(self, behaviour: str, model: str) -> None:
        assert behaviour in BEHAVIOURS
        self.behaviour, self.model = behaviour, model
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"])])

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": self.model, "object": "model", "created": 0, "owned_by": "library"}]})

    async def _chat(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        with self.lock:
            self.requests.append(body)
        if self.behaviour == "refusing" and body.get("tools"):
            return Response(no_tools_body(body["model"]), status_code=400,
                            media_type="application/json")
        text, call = decide(body, self.behaviour == "refusing")
        pieces = _render(text, call, self.behaviour)
        if not body.get("stream"):
            return Response(go_json(_whole(body["model"], pieces)), media_type="application/json")
        return StreamingResponse(_stream(body["model"], pieces), media_type="text/event-stream")


# --- deciding -----------------------------------------------------------------


def decide(body: dict[str, Any], from_prompt: bool) -> tuple[str, tuple[str, dict[str, Any]] | None]:
    """(text, call or None) for this request."""
    messages = body.get("messages") or []
    tools = _prompt_tools(messages) if from_prompt else {
        t["function"]["name"]: t["function"] for t in body.get("tools") or []}
    task, start = _task(messages)
    if task is None or not tools:
        return "OK.", None
    results = [_text(m.get("content")) for m in messages[start + 1:]
               if m.get("role") == "tool" or "<tool_response>" in _text(m.get("content"))]
    kind, path, token = task
    if results:
        if kind == "read":
            found = TOKEN.findall("\n".join(results))
            return f"The file says: {found[-1] if found else 'nothing I can read'}", None
        return f"Done: created {path}.", None
    call = _read_call(tools, path) if kind == "read" else _write_call(tools, path, token)
    if call is None:
        return "I have no tool for that.", None
    return "", call


def _task(messages: list[dict[str, Any]]) -> tuple[tuple[str, str, str] | None, int]:
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") != "user":
            continue
        text = _text(messages[i].get("content"))
        if (m := _CREATE.search(text)) is not None:
            return ("write", m.group(1), m.group(2)), i
        if (m := _READ.search(text)) is not None:
            return ("read", m.group(1), ""), i
    return None, 0


def _read_call(tools: dict[str, Any], path: str) -> tuple[str, dict[str, Any]] | None:
    for name, function in tools.items():
        if "read" in name.lower() and (key := _key(function, _PATH_KEYS)):
            return name, {key: path}
    if "exec_command" in tools:  # Codex reads with its shell
        return "exec_command", {"cmd": f"cat {path}", "workdir": path.rsplit("/", 1)[0]}
    return None


def _write_call(tools: dict[str, Any], path: str, token: str) -> tuple[str, dict[str, Any]] | None:
    if "apply_patch" in tools:  # Codex: a patch adding the file
        return "apply_patch", {"input": f"*** Begin Patch\n*** Add File: {path}\n+{token}\n"
                                        "*** End Patch\n"}
    for name, function in tools.items():
        if "write" in name.lower() and (key := _key(function, _PATH_KEYS)) and (
                text_key := _key(function, _TEXT_KEYS)):
            return name, {key: path, text_key: token + "\n"}
    return None


def _key(function: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    props = (function.get("parameters") or {}).get("properties") or {}
    return next((k for k in keys if k in props), None)


def _prompt_tools(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Tools described in the system prompt (toolshim's Hermes emulation: JSON lines)."""
    tools: dict[str, Any] = {}
    for message in messages:
        text = _text(message.get("content")) if message.get("role") == "system" else ""
        for block in re.findall(r"<tools>\n(.*?)\n</tools>", text, re.DOTALL):
            for line in block.splitlines():
                try:
                    function = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(function, dict) and isinstance(function.get("name"), str):
                    tools[function["name"]] = function
    return tools


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


# --- answering ----------------------------------------------------------------


def _render(text: str, call: tuple[str, dict[str, Any]] | None, behaviour: str) -> list[Any]:
    """The answer as stream pieces: strings are content, dicts a native call fragment."""
    if call is None:
        return _cut(text)
    name, args = call
    if behaviour == "native":
        raw = orjson.dumps(args).decode()
        return [{"name": name}, *({"arguments": p} for p in _cut(raw, 7))]
    if behaviour == "qwen3_xml":
        params = "".join(f"<parameter={k}>\n{v if isinstance(v, str) else orjson.dumps(v).decode()}"
                         "\n</parameter>\n" for k, v in args.items())
        return _cut(f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>")
    return _cut("<tool_call>\n" + orjson.dumps({"name": name, "arguments": args}).decode()
                + "\n</tool_call>")


def _cut(text: str, size: int = 12) -> list[Any]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


_HEAD = {"id": "chatcmpl-527", "created": 1755000000}
"""what every answer of one Ollama /v1 stream shares (Ollama's `chatcmpl-<n>` id)."""


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    # Ollama's /v1 bytes (>= 0.32.6): its fields and order, Go's HTML-safe escaping.
    return b"data: " + go_json({
        **_HEAD, "object": "chat.completion.chunk", "model": model,
        "system_fingerprint": "fp_ollama",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + b"\n\n"


async def _stream(model: str, pieces: list[Any]) -> Any:
    yield _chunk(model, {"role": "assistant", "content": ""})
    for piece in pieces:
        if isinstance(piece, str):
            yield _chunk(model, {"content": piece})
    call = _call(pieces)
    if call is not None:  # Ollama sends a call whole, in one chunk
        yield _chunk(model, {"tool_calls": [{"index": 0, **call}]})
    yield _chunk(model, {}, "tool_calls" if call is not None else "stop")
    yield b"data: [DONE]\n\n"


def _call(pieces: list[Any]) -> dict[str, Any] | None:
    """The native call the pieces make, whole: id, type, function (name, arguments)."""
    named = [p for p in pieces if isinstance(p, dict)]
    if not named:
        return None
    return {"id": "call_ab12cd34", "type": "function", "function": {
        "name": named[0]["name"],
        "arguments": "".join(p.get("arguments", "") for p in named[1:])}}


def _whole(model: str, pieces: list[Any]) -> dict[str, Any]:
    text = "".join(p for p in pieces if isinstance(p, str))
    message: dict[str, Any] = {"role": "assistant", "content": text}
    call = _call(pieces)
    if call is not None:
        message["tool_calls"] = [call]
    return {**_HEAD, "object": "chat.completion", "model": model,
            "system_fingerprint": "fp_ollama",
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if call is not None else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
