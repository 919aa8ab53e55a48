"""Floor for the benchmark: toolshim's own server stack and upstream client, no product.

A bare ASGI app under uvicorn, served the way the CLI serves toolshim (httptools,
uvloop, the CLI's protocol, no access log), that forwards POST
/v1/chat/completions through toolshim's upstream transport (proxy/backends/wire.py)
and copies the answer back piece by piece. No parsing, no checks, no stages, no
logging or metrics: what is left is what a Python hop over this stack costs at all,
so `toolshim - floor` is what the product's own work costs on top of it.
Run: ``python bench/_floor_forwarder.py --port P --upstream http://127.0.0.1:U``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's proxy/

from _forwarder_cli import run_forwarder  # bench/, this script's directory

from proxy.asgi.client_timeouts import header_timeout_protocol
from proxy.backends.wire import WireTransport

_TIMEOUTS = {"connect": 10.0, "read": 60.0, "write": 60.0, "pool": 10.0}


def create_app(upstream: str) -> Any:
    wire = WireTransport(max_connections=1024)
    url = httpx.URL(upstream.rstrip("/") + "/v1/chat/completions")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await wire.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["path"] != "/v1/chat/completions":  # /healthz and the rest
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        response = await wire.send("POST", url, {"content-type": "application/json"}, body,
                                   _TIMEOUTS)
        try:
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": [(b"content-type",
                                     response.headers.get("content-type", "").encode())]})
            async for piece in response.aiter_raw():
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()

    app.wire = wire  # type: ignore[attr-defined]  # for a caller that runs no lifespan
    return app


def main() -> None:
    run_forwarder(create_app, __doc__ or "", server_header=False,
                  http=header_timeout_protocol(60.0))


if __name__ == "__main__":
    main()
