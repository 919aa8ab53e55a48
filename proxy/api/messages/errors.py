"""Anthropic's error envelope: `{"type": "error", "error": {"type", "message"}, "request_id"}`.

Every error this door answers (a malformed body, an unknown model, the queue,
an upstream failure, a 401 at the edge) has this shape and the API's error type
for its status, so the Anthropic SDKs raise their matching exception classes
(BadRequestError, AuthenticationError, NotFoundError, RateLimitError, ...).
The `request-id` header carries the same id, as the API's does.
"""

from __future__ import annotations

import orjson
from starlette.responses import Response

from proxy.errors import ApiError

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
          529: "overloaded_error"}


def error_type(status: int) -> str:
    """The API's error type for a status ("may also use invalid_request_error for other
    4XX status codes"; every 5xx but 529 is api_error)."""
    return _TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def envelope(status: int, message: str, request_id: str | None) -> dict[str, object]:
    body: dict[str, object] = {"type": "error",
                               "error": {"type": error_type(status), "message": message}}
    if request_id:
        body["request_id"] = request_id
    return body


def render(error: ApiError, request_id: str) -> Response:
    """`error` (already masked) as this door answers it."""
    headers = dict(error.headers)
    headers["request-id"] = request_id
    return Response(orjson.dumps(envelope(error.status, error.message, request_id)),
                    status_code=error.status, media_type="application/json",
                    headers=headers)


AUTH_MESSAGE = ("Invalid or missing API key. Send it as 'x-api-key: <key>' or "
                "'Authorization: Bearer <key>'.")
