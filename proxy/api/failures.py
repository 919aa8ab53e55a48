"""The one error tail every upstream-calling route shares.

Runs a route's work and maps what went wrong to an OpenAI error answer: an
ApiError as it was decided, a client that left (mid-body or while waiting)
as a 499 logged at info, and a bug of ours as one logged 500. The request
is accounted once, with its overhead header, whatever the ending.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import ClientDisconnect
from starlette.responses import Response

from proxy.errors import ApiError
from proxy.flow.exchange import Exchange

CLIENT_CLOSED = 499
"""nginx's status for a client that closed the connection before the answer."""


def client_left() -> ApiError:
    return ApiError(CLIENT_CLOSED, "client closed the connection", code="client_closed")


Render = Callable[[ApiError, str], Response]
"""An error (masked) and the request id -> the answer in a client dialect's envelope."""


def _openai(error: ApiError, request_id: str) -> Response:
    return error.response()


async def answer_or_error(ex: Exchange, work: Awaitable[Response], what: str,
                          render: Render = _openai) -> Response:
    """`work`'s response, or the error answer for how it failed (`what` names the route;
    `render` shapes it: the OpenAI envelope unless the dialect has its own)."""
    try:
        return await work
    except ApiError as exc:
        error = exc.settled()
    except ClientDisconnect:
        error = client_left()
    except Exception:
        # A bug of ours must still end as one clean, logged, OpenAI-shaped error.
        ex.svc.telemetry.log.exception("%s failed inside toolshim", what,
                                       extra={"record": {"request_id": ex.record.request_id}})
        error = ApiError(500, "internal error in toolshim", type_="server_error")
    return error_reply(ex, error, render)


def error_reply(ex: Exchange, error: ApiError, render: Render = _openai) -> Response:
    error = error.masked(ex.redactor().mask)  # an upstream's text may repeat its credentials
    ex.finish(error.status, error.message)  # also reports a record settled unreported
    response = render(error, ex.record.request_id)
    response.headers["x-toolshim-overhead-ms"] = f"{ex.overhead_ms():.2f}"
    return response
