"""Server internals in one place: the only package that reaches into uvicorn's,
Starlette's or anyio's private objects or drives ASGI by hand.

Everything above it speaks plain ASGI and Starlette's public API. What this package
relies on, each guarded by a test in tests/asgi/test_compat.py that fails on an
upgrade that takes it away (the versions it was checked with are pinned in
pyproject.toml):

- uvicorn's HTTP protocol classes: `AutoHTTPProtocol` (the one uvicorn would pick),
  subclassed for the header deadline; its `cycle` (one request's
  `RequestResponseCycle`, with `scope`, `more_body` and
  `response_complete`), `transport`, `loop`, and its `data_received`,
  `connection_made`, `connection_lost` and `send_400_response` hooks
  (client_timeouts.py);
- uvicorn's `send` being a coroutine function that finishes without suspending
  unless its transport's writes are paused (direct_send.py);
- anyio's asyncio backend's cancel scope class, built without anyio's loop lookup
  (scopes.py);
- `uvicorn.Server.shutdown(sockets)`, overridden to begin the shutdown drain
  (server.py).

Outside it, two public-but-undocumented hooks are used and checked there too:
api/passthrough.py overrides `StreamingResponse.stream_response(send)`, and the edge
and the console read uvicorn's per-request `scope["state"]` dict.
"""
