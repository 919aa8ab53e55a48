"""The OpenAI error envelope, and the one exception type routes raise.

Every error a client sees from toolshim has the shape
`{"error": {"message", "type", "param", "code"}}`, so the OpenAI SDKs map it to
their usual exception classes (400 BadRequestError, 404 NotFoundError, ...).
Must not: log, or put what a client may not see (keys, upstream credentials,
tracebacks) into a message; the other dialects' envelopes are their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from starlette.responses import Response

_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    # An upstream that failed reads the same on every endpoint (chat, models, passthrough).
    502: "api_error",
    504: "timeout_error",
}


def error_type_for(status: int) -> str:
    return _TYPE_BY_STATUS.get(status, "api_error" if status < 500 else "server_error")


def error_body(
    message: str, status: int, *, type_: str | None = None, param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    return {
        "error": {
            "message": message,
            "type": type_ or error_type_for(status),
            "param": param,
            "code": code,
        }
    }


class ApiError(Exception):
    """An error to answer with, already decided: status plus envelope fields."""

    def __init__(
        self, status: int, message: str, *, type_: str | None = None,
        param: str | None = None, code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code
        self.headers = headers or {}

    def settled(self) -> ApiError:
        """This error once it is answered (or dropped): without its traceback.

        The traceback holds the frames it passed through, and those may hold the error
        again (a translator's stored failure, a local): a cycle that would leave the
        whole request (its Exchange, the upstream call, uvicorn's cycle) to the cyclic
        collector. A settled error is answered or logged by its message, never by a
        trace, so every place that ends an ApiError's travel settles it."""
        return self.with_traceback(None)

    def masked(self, mask: Callable[[str], str]) -> ApiError:
        """This error with `mask` applied to its texts (the upstream may have written them);
        itself when nothing changed."""
        message = mask(self.message)
        param = mask(self.param) if self.param is not None else None
        code = mask(self.code) if self.code is not None else None
        if (message, param, code) == (self.message, self.param, self.code):
            return self
        return ApiError(self.status, message, type_=self.type, param=param, code=code,
                        headers=self.headers)

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.status, type_=self.type, param=self.param,
                          code=self.code)

    def response(self) -> Response:
        return Response(orjson.dumps(self.body()), status_code=self.status,
                        media_type="application/json", headers=self.headers)


MAX_MODEL_NAME = 256
"""characters a model name may have. No backend names a model anywhere near this (Ollama's
longest are registry paths of ~100), and every per-model table (counters, probes, listings,
shared facts) keys on the name: past this, a name is a client's mistake or an attack."""


def check_model_name(model: object) -> None:
    """A 400 for a model name longer than MAX_MODEL_NAME, quoting only its start."""
    if isinstance(model, str) and len(model) > MAX_MODEL_NAME:
        raise ApiError(400, f"model name is {len(model)} characters long, more than the "
                       f"{MAX_MODEL_NAME} allowed: {model[:40]!r}...",
                       type_="invalid_request_error", param="model", code="model_name_too_long")


def internal_error() -> Response:
    """The answer to a bug of ours that reached the edge: a 500 that says nothing more."""
    return Response(orjson.dumps(error_body("internal error in toolshim", 500)),
                    status_code=500, media_type="application/json")


def upstream_error_body(status: int, raw: bytes) -> dict[str, Any]:
    """Re-shape an upstream error body into the OpenAI envelope.

    Backends disagree (docs/backends.md): Ollama native `{"error": "msg"}`, Ollama /v1
    and vLLM nested (vLLM's `code` is an int), pre-0.10 vLLM flat, llama.cpp with
    an int code and no param, Google's `[{"error": {"code", "message", "status"}}]`. Clients only understand the OpenAI shape.
    """
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = raw.decode("utf-8", "replace").strip()[:2000]
        return error_body(text or f"upstream returned HTTP {status}", status)
    if isinstance(data, list) and len(data) == 1:
        data = data[0]  # Google's OpenAI-compatible endpoint wraps its envelope in a list
    err = data.get("error") if isinstance(data, dict) else None
    if isinstance(err, str):
        return error_body(err, status)
    if isinstance(err, dict):
        source = err
    elif isinstance(data, dict) and "message" in data:
        source = data
    else:
        return error_body(f"upstream returned HTTP {status}", status)
    message = source.get("message")
    code = source.get("code")
    param = source.get("param")
    return error_body(
        str(message) if message is not None else f"upstream returned HTTP {status}",
        status,
        type_=source.get("type") if isinstance(source.get("type"), str) else None,
        param=param if isinstance(param, str) else None,
        code=str(code) if code is not None else None,
    )
