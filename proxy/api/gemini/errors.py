"""Google's error envelope: `{"error": {"code", "message", "status"}}`.

Every error this door answers (a malformed body, an unknown model, the queue, an
upstream failure, a 401 at the edge) has this shape, with the canonical status
name Google's APIs give its HTTP code, so the google-genai SDKs raise their
ClientError / ServerError with the code and status, and Gemini CLI reads its
retry decisions (429, 5xx) from them.
"""

from __future__ import annotations

import orjson
from starlette.responses import Response

from proxy.errors import ApiError

_STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
             404: "NOT_FOUND", 408: "DEADLINE_EXCEEDED", 409: "ABORTED",
             413: "INVALID_ARGUMENT", 422: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
             499: "CANCELLED", 500: "INTERNAL", 501: "UNIMPLEMENTED", 502: "UNAVAILABLE",
             503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}


def status_name(code: int) -> str:
    """The canonical status for an HTTP code (Google's google.rpc.Code mapping)."""
    return _STATUSES.get(code, "INVALID_ARGUMENT" if code < 500 else "INTERNAL")


def envelope(code: int, message: str) -> dict[str, object]:
    return {"error": {"code": code, "message": message, "status": status_name(code)}}


def render(error: ApiError, request_id: str) -> Response:
    """`error` (already masked) as this door answers it."""
    headers = dict(error.headers)
    headers["x-request-id"] = request_id
    return Response(orjson.dumps(envelope(error.status, error.message)),
                    status_code=error.status, media_type="application/json",
                    headers=headers)


AUTH_MESSAGE = ("API key not valid. Send it as 'x-goog-api-key: <key>', as '?key=<key>' "
                "or as 'Authorization: Bearer <key>'.")
