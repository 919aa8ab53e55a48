"""Recognise a backend's "I can't do tools" answer, by each backend's own wording.

Owns the one table of refusal signatures (docs/backends.md §1a, §2, §3, §6, R1, R2, R8)
and the extraction of the error message from the envelopes those backends use.
Pure: no I/O, no retry decisions (retry.py decides what to do with a Refusal).
Any answer not matched here (context too long, model not found, other 4xx/5xx)
is not a refusal and must never be retried without tools.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import orjson

RefusalKind = Literal["tools", "tool_choice"]


@dataclass(frozen=True)
class Refusal:
    kind: RefusalKind
    backend: str
    message: str


@dataclass(frozen=True)
class _Signature:
    statuses: frozenset[int]
    pattern: re.Pattern[str]
    kind: RefusalKind
    backend: str


def _sig(statuses: set[int], pattern: str, kind: RefusalKind, backend: str) -> _Signature:
    return _Signature(frozenset(statuses), re.compile(pattern, re.IGNORECASE), kind, backend)


# Order matters: the first match wins, specific wordings before the generic fallback.
_SIGNATURES: tuple[_Signature, ...] = (
    # Ollama /v1 and /api/chat: "<model> does not support tools" (prefix changed in
    # v0.5.2 from the name as sent to the fully qualified name; key on the suffix).
    _sig({400}, r"does not support tools\b", "tools", "ollama"),
    # vLLM without a tool parser: tools alone default tool_choice to "auto" server-side.
    _sig({400}, r'"auto" tool choice requires --enable-auto-tool-choice', "tools", "vllm"),
    _sig({400}, r'tool_choice="required" requires --tool-call-parser', "tool_choice", "vllm"),
    _sig({400}, r'tool_choice=function ".*" requires --tool-call-parser', "tool_choice", "vllm"),
    # llama-server without --jinja throws runtime_error, which it maps to HTTP 500.
    _sig({500}, r"\btools param requires --jinja flag", "tools", "llama.cpp"),
    _sig({500}, r"\btool_choice param requires --jinja flag", "tool_choice", "llama.cpp"),
    # OpenRouter: no provider for this model accepts the parameter.
    _sig({404}, r"No endpoints found that support tool use", "tools", "openrouter"),
    _sig(
        {404},
        r"No endpoints found that support the provided 'tool_choice' value",
        "tool_choice",
        "openrouter",
    ),
    # Generic wording used by other OpenAI-compatible servers.
    _sig(
        {400},
        r"does not support (tools|tool use|tool calling|function calling|functions)\b"
        r"|\btools? (are|is) not supported"
        r"|\b(function|tool) calling is not supported",
        "tools",
        "generic",
    ),
)


def classify_refusal(status: int, body: bytes) -> Refusal | None:
    """Return the Refusal an upstream error answer means, or None if it is something else."""
    if status < 400:
        return None
    message = _error_message(body)
    if message is None:
        return None
    for sig in _SIGNATURES:
        if status in sig.statuses and sig.pattern.search(message):
            return Refusal(kind=sig.kind, backend=sig.backend, message=message)
    return None


def _error_message(body: bytes) -> str | None:
    """The error text of an OpenAI nested, vLLM flat, or Ollama native envelope."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, str):
        return error  # Ollama native: {"error": "..."}
    if isinstance(error, dict):
        message = error.get("message")
        return message if isinstance(message, str) else None
    # vLLM before v0.10.1: {"object": "error", "message": "...", ...}
    message = data.get("message")
    if data.get("object") == "error" and isinstance(message, str):
        return message
    return None
