"""Canned Ollama (>= v0.32.6) answers for the benchmark's fake upstream, as bytes.

Owns the wire shapes only (docs/backends.md 1b, 1c, R3, R7); no sockets, no clock. Models:
``bench-small`` (short answer; streamed as 2 chunks), ``bench-chunks-N`` and
``bench-slow-N`` (N content chunks; the server decides the pacing); ``bench-native-N``
and ``bench-native-slow-N`` the same through Ollama's native /api/chat.
"""

from __future__ import annotations

import re

import orjson

CREATED = 1755000000
CHUNK_ID = "chatcmpl-527"
SMALL_PARTS = ("Hello!", " How can I help you today?")
BENCH_MODELS = ("bench-small", "bench-chunks-64", "bench-slow-64", "bench-native-64",
                "bench-slow-16", "bench-native-slow-16", "bench-native-slow-64")
"""the listed models (the proxy answers 404 for others); the -16 streams are the short
ones that per-event instruction counts subtract (bench/README.md)."""
_GIN_JSON = b"application/json; charset=utf-8"
_MODEL_RE = re.compile(
    r"^bench-(small|chunks-(\d{1,4})|slow-(\d{1,4})|native-(\d{1,4})|native-slow-(\d{1,4}))$")
NDJSON = b"application/x-ndjson"
CREATED_AT = "2025-07-07T20:22:19.184789Z"


def _event(obj: object) -> bytes:
    # Ollama's /v1 writer: "data: " + compact JSON + blank line, no "event:" lines.
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk(model: str, delta: dict[str, str], finish: str | None) -> dict[str, object]:
    return {"id": CHUNK_ID, "object": "chat.completion.chunk", "created": CREATED,
            "model": model, "system_fingerprint": "fp_ollama",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _usage(parts: tuple[str, ...]) -> dict[str, int]:
    return {"prompt_tokens": 24, "completion_tokens": len(parts),
            "total_tokens": 24 + len(parts)}


def content_parts(model: str) -> tuple[str, ...] | None:
    """The content deltas a bench model answers with, or None for an unknown model."""
    m = _MODEL_RE.match(model)
    if m is None:
        return None
    count = int(m.group(2) or m.group(3) or m.group(4) or m.group(5) or 0)
    if m.group(1) == "small":
        return SMALL_PARTS
    return tuple(f" word{i}" for i in range(max(count, 1)))


def stream_events(model: str, parts: tuple[str, ...], include_usage: bool) -> list[bytes]:
    """R3 framing: role on the first chunk only, finish on its own `delta: {}` chunk."""
    events = [_event(_chunk(model, {"role": "assistant", "content": parts[0]}, None))]
    events += [_event(_chunk(model, {"content": p}, None)) for p in parts[1:]]
    events.append(_event(_chunk(model, {}, "stop")))
    if include_usage:
        usage = {**_chunk(model, {}, None), "choices": [], "usage": _usage(parts)}
        events.append(_event(usage))
    events.append(b"data: [DONE]\n\n")
    return events


def completion_body(model: str, parts: tuple[str, ...]) -> bytes:
    body = {"id": CHUNK_ID, "object": "chat.completion", "created": CREATED, "model": model,
            "system_fingerprint": "fp_ollama",
            "choices": [{"index": 0,
                         "message": {"role": "assistant", "content": "".join(parts)},
                         "finish_reason": "stop"}],
            "usage": _usage(parts)}
    return orjson.dumps(body) + b"\n"  # Go's json.Encoder ends with a newline


def http_chunk(data: bytes) -> bytes:
    # Go's net/http flushes each SSE event as one chunk of a chunked body.
    return b"%x\r\n%s\r\n" % (len(data), data)



def listing(kind: str) -> bytes:
    """GET /v1/models (kind "v1") or GET /api/tags (anything else)."""
    if kind == "v1":
        data = [{"id": n, "object": "model", "created": CREATED, "owned_by": "library"}
                for n in BENCH_MODELS]
        return orjson.dumps({"object": "list", "data": data}) + b"\n"
    models = [{"name": n, "model": n, "modified_at": "2026-01-01T00:00:00Z", "size": 1,
               "digest": "0" * 64, "capabilities": ["completion", "tools"],
               "details": {"format": "gguf", "family": "bench"}} for n in BENCH_MODELS]
    return orjson.dumps({"models": models})


def show(body: bytes) -> tuple[str, bytes, bytes]:
    """POST /api/show: status, content type, body; the proxy reads `capabilities`."""
    req = orjson.loads(body or b"{}")
    name = str(req.get("model") or req.get("name") or "")
    if content_parts(name) is None:
        return "404 Not Found", _GIN_JSON, orjson.dumps({"error": f"model '{name}' not found"})
    return "200 OK", _GIN_JSON, orjson.dumps({
        "modelfile": "", "template": "{{ .Prompt }}", "details": {"family": "bench"},
        "model_info": {}, "capabilities": ["completion", "tools"],
        "modified_at": "2026-01-01T00:00:00Z"})


def native_lines(model: str, parts: tuple[str, ...]) -> list[bytes]:
    """Ollama's /api/chat stream (docs/backends.md R4): one JSON object per line."""
    lines = [orjson.dumps({"model": model, "created_at": CREATED_AT,
                           "message": {"role": "assistant", "content": p}, "done": False})
             + b"\n" for p in parts]
    lines.append(orjson.dumps({
        "model": model, "created_at": CREATED_AT, "message": {"role": "assistant", "content": ""},
        "done": True, "done_reason": "stop", "total_duration": 182242375,
        "load_duration": 41295167, "prompt_eval_count": 24, "prompt_eval_duration": 24573166,
        "eval_count": len(parts), "eval_duration": 115959084}) + b"\n")
    return lines


def native_body(model: str, parts: tuple[str, ...]) -> bytes:
    """Ollama's /api/chat answer with stream false."""
    return orjson.dumps({
        "model": model, "created_at": CREATED_AT,
        "message": {"role": "assistant", "content": "".join(parts)}, "done": True,
        "done_reason": "stop", "prompt_eval_count": 24, "eval_count": len(parts)})


def version() -> bytes:
    return orjson.dumps({"version": "0.33.0"})


def running() -> bytes:
    """GET /api/ps: nothing loaded (the window is then the proxy's assumed default)."""
    return orjson.dumps({"models": []})
