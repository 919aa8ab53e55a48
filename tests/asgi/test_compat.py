"""What proxy/asgi relies on in uvicorn, Starlette and anyio, one test per private thing.

An upgrade that takes one away fails here, by name, rather than in a request. Each
test drives the installed library itself (uvicorn's real HTTP protocol over a
recording transport), never our code's view of it. The supported versions are pinned
in pyproject.toml; a failure here means the pin must not move until proxy/asgi follows.
"""

from __future__ import annotations

import asyncio
import inspect
import socket
from typing import Any

import anyio
import uvicorn
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.auto import AutoHTTPProtocol
from uvicorn.server import ServerState

from proxy.asgi.client_timeouts import HeaderTimeoutProtocol
from proxy.asgi.server import draining_server

_WHOLE = b"POST /v1/x HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}"
_HEAD_ONLY = b"POST /v1/x HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n"


class _Transport(asyncio.Transport):
    """A connection that records what the server writes."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 8000) if name in ("sockname", "peername") else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


class _App:
    """An ASGI app that keeps each call's scope and send, and answers `{}`."""

    def __init__(self) -> None:
        self.calls: list[tuple[Scope, Send]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        self.calls.append((scope, send))
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def _protocol(app: _App, cls: Any = AutoHTTPProtocol) -> tuple[Any, _Transport]:
    config = Config(app, lifespan="off", log_config=None)  # leaves logging as it is
    protocol = cls(config=config, server_state=ServerState(), app_state={},
                   _loop=asyncio.get_running_loop())
    transport = _Transport()
    protocol.connection_made(transport)
    return protocol, transport


async def _answered(protocol: Any) -> None:
    for _ in range(100):
        if protocol.cycle is not None and protocol.cycle.response_complete:
            return
        await asyncio.sleep(0)
    raise AssertionError("the app did not answer")


def test_uvicorn_auto_protocol_has_the_hooks_the_header_deadline_overrides() -> None:
    # client_timeouts.HeaderTimeoutProtocol subclasses it and wraps these by name.
    assert isinstance(AutoHTTPProtocol, type)
    for hook in ("connection_made", "data_received", "connection_lost", "send_400_response"):
        assert inspect.isfunction(getattr(AutoHTTPProtocol, hook)), hook
    assert list(inspect.signature(AutoHTTPProtocol.send_400_response).parameters) == [
        "self", "msg"]


async def test_uvicorn_protocol_exposes_loop_transport_and_a_cycle_per_request() -> None:
    # The header deadline reads `loop`, `transport` and `cycle` (None before a request).
    protocol, transport = _protocol(_App())
    assert protocol.loop is asyncio.get_running_loop()
    assert protocol.transport is transport
    assert protocol.cycle is None
    protocol.data_received(_HEAD_ONLY)
    cycle = protocol.cycle
    assert cycle is not None
    assert cycle.more_body is True and cycle.response_complete is False
    protocol.data_received(b"{}")
    assert protocol.cycle is cycle and cycle.more_body is False
    await _answered(protocol)
    assert cycle.response_complete is True


async def test_uvicorn_scope_has_a_state_dict_and_a_whole_request_no_more_body() -> None:
    # BODY_IN is set in `cycle.scope["state"]` when the body came with the headers.
    app = _App()
    protocol, _ = _protocol(app)
    protocol.data_received(_WHOLE)
    assert protocol.cycle.more_body is False
    assert isinstance(protocol.cycle.scope["state"], dict)
    await _answered(protocol)
    scope, _ = app.calls[0]
    assert scope["state"] is protocol.cycle.scope["state"]


async def test_uvicorn_send_finishes_without_suspending_unless_writes_are_paused() -> None:
    # direct_send.SseWriter runs `send` by hand from a read callback: it must be a
    # coroutine function that completes on its first step while the socket takes
    # bytes, and suspends (to be finished by a task) once writing is paused.
    app = _StreamApp()
    protocol, transport = _protocol(app)  # type: ignore[arg-type]
    protocol.data_received(_WHOLE)
    send = await app.started
    assert inspect.iscoroutinefunction(send)
    piece: Message = {"type": "http.response.body", "body": b"a", "more_body": True}
    coroutine = send(piece)
    try:
        coroutine.send(None)
        raise AssertionError("send suspended with the socket taking bytes")
    except StopIteration:
        pass
    assert transport.written[-1].endswith(b"a\r\n")
    protocol.pause_writing()
    coroutine = send(piece)
    coroutine.send(None)  # suspends: the flow waits for the drain
    protocol.resume_writing()
    try:
        coroutine.send(None)
        raise AssertionError("send did not finish once writing resumed")
    except StopIteration:
        pass
    app.done.set()


class _StreamApp:
    """An ASGI app that starts a chunked answer and hands its `send` out."""

    def __init__(self) -> None:
        self.started: asyncio.Future[Send] = asyncio.get_running_loop().create_future()
        self.done = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        self.started.set_result(send)
        await self.done.wait()


async def test_uvicorn_answers_bytes_that_are_not_http_through_send_400_response() -> None:
    # The OpenAI-shaped 400 comes from overriding this hook.
    protocol, transport = _protocol(_App(), HeaderTimeoutProtocol)
    protocol.data_received(b"\x00\x01 not http\r\n\r\n")
    assert transport.closed
    assert b'"code":"invalid_http"' in b"".join(transport.written)


async def test_starlette_streaming_response_sends_through_stream_response() -> None:
    # passthrough._Relayed overrides `stream_response(send)` to leave a body that the
    # upstream broke off unfinished.
    seen: list[str] = []

    class Relayed(StreamingResponse):
        async def stream_response(self, send: Send) -> None:
            seen.append("ours")
            await super().stream_response(send)

    async def body() -> Any:
        yield b"x"

    async def receive() -> Message:
        await asyncio.sleep(10)
        return {"type": "http.disconnect"}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await Relayed(body())({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)
    assert seen == ["ours"] and sent[-1] == {"type": "http.response.body", "body": b"",
                                             "more_body": False}


async def test_anyio_cancel_scope_class_is_the_backends_and_takes_shield_and_deadline() -> None:
    # scopes.cancel_scope builds `type(anyio.CancelScope())` directly.
    cls = type(anyio.CancelScope())
    assert issubclass(cls, anyio.CancelScope)
    scope = cls(shield=True, deadline=1.0)
    assert scope.shield is True and scope.deadline == 1.0
    with cls() as outer:
        outer.cancel()
        await asyncio.sleep(1)
    assert outer.cancelled_caught


async def test_uvicorn_server_shutdown_is_the_coroutine_run_once_listening_stops() -> None:
    # server.draining_server overrides `Server.shutdown(sockets)` to begin the drain.
    assert inspect.iscoroutinefunction(uvicorn.Server.shutdown)
    assert list(inspect.signature(uvicorn.Server.shutdown).parameters) == ["self", "sockets"]
    begun: list[bool] = []
    server = draining_server(lambda: begun.append(True))(
        Config(_App(), lifespan="off", log_config=None))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    assert begun == []
    server.should_exit = True
    await asyncio.wait_for(serving, 10)
    sock.close()
    assert begun == [True]
