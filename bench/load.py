"""Closed-loop HTTP load generator for the benchmark (aiohttp, one session).

Owns one measured run against one base URL: `concurrency` workers each send a chat
request, read the whole answer, check it is complete, and go again, until the window
closes (after `duration` seconds or `max_requests` answers). Only answers that finish
inside the window count. It does not start servers or read /proc (run.py does).
Run alone: ``python bench/load.py http://127.0.0.1:PORT --model bench-small -c 32``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import aiohttp
import orjson

_DONE = b"data: [DONE]\n\n"


def _tool(name: str, desc: str, props: dict[str, str]) -> dict[str, object]:
    schema = {"type": "object", "additionalProperties": False, "required": list(props),
              "properties": {k: {"type": "string", "description": v} for k, v in props.items()}}
    return {"type": "function",
            "function": {"name": name, "description": desc, "parameters": schema}}


# Three ordinary tools (shapes of common real-world tools): W2t offers them on a
# plain-text stream, so the proxy pays for tool-call checking and text-call recovery
# on every chunk without ever finding a call.
TOOLS = (
    _tool("get_weather", "Current weather for a city.", {"city": "City name, e.g. Lisbon."}),
    _tool("read_file", "Read a text file from the workspace.", {"path": "File path."}),
    _tool("write_file", "Create or overwrite a text file.",
          {"path": "File path.", "content": "Full new content of the file."}),
)


@dataclass(frozen=True)
class LoadSpec:
    model: str
    stream: bool
    concurrency: int
    tools: bool = False
    duration: float = 3.0
    warmup: float = 0.5
    max_requests: int = 1_000_000
    timeout: float = 30.0
    drain: float = 3.0
    ramp: float = 0.0  # workers start spread over this many seconds
    api: str = "chat"  # or "responses" / "messages" / "gemini": the same conversation there


class WindowProbe(Protocol):
    """Called exactly when the measured window opens and closes (e.g. to read CPU)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


_COMPLETED = b"event: response.completed\n"
_MESSAGE_STOP = b"event: message_stop\n"
_GEMINI = "/v1beta/"
_FINISHED = b'"finishReason":'
"""a Gemini stream's last chunk carries it (there is no [DONE])."""
_PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses",
          "messages": "/v1/messages", "gemini": "/v1beta/models/{model}:{method}"}


def request_body(spec: LoadSpec) -> bytes:
    if spec.api == "responses":
        return orjson.dumps({"model": spec.model, "stream": spec.stream,
                             "instructions": "You are a helpful assistant.",
                             "input": "Say hello in one short sentence."})
    if spec.api == "gemini":
        return orjson.dumps({"systemInstruction": {"parts": [{"text": "You are a helpful "
                                                                       "assistant."}]},
                             "contents": [{"role": "user", "parts": [
                                 {"text": "Say hello in one short sentence."}]}]})
    if spec.api == "messages":
        return orjson.dumps({"model": spec.model, "stream": spec.stream, "max_tokens": 1024,
                             "system": "You are a helpful assistant.",
                             "messages": [{"role": "user",
                                           "content": "Say hello in one short sentence."}]})
    body: dict[str, object] = {
        "model": spec.model, "stream": spec.stream,
        "messages": [{"role": "system", "content": "You are a helpful assistant."},
                     {"role": "user", "content": "Say hello in one short sentence."}]}
    if spec.tools:
        body["tools"] = list(TOOLS)
    return orjson.dumps(body)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); NaN when there is nothing to rank."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)
    ttfbs: list[float] = field(default_factory=list)
    seconds: float = 0.0
    errors: int = 0
    first_error: str = ""

    @property
    def completed(self) -> int:
        return len(self.latencies)

    @property
    def rate(self) -> float:
        return self.completed / self.seconds if self.seconds > 0 else math.nan

    def latency_ms(self, q: float) -> float:
        return percentile(self.latencies, q) * 1000

    def ttfb_ms(self, q: float) -> float:
        return percentile(self.ttfbs, q) * 1000

    def summary(self) -> dict[str, float | int | str]:
        return {"completed": self.completed, "errors": self.errors, "rate": self.rate,
                "p50_ms": self.latency_ms(50), "p99_ms": self.latency_ms(99),
                "ttfb_p50_ms": self.ttfb_ms(50), "ttfb_p99_ms": self.ttfb_ms(99),
                "first_error": self.first_error}


@dataclass
class _Window:
    result: LoadResult
    max_requests: int
    full: asyncio.Event = field(default_factory=asyncio.Event)
    start: float = math.inf
    end: float = math.inf
    stopping: bool = False
    in_flight: int = 0

    def record(self, t_end: float, latency: float, ttfb: float) -> None:
        if self.start <= t_end <= self.end:
            self.result.latencies.append(latency)
            self.result.ttfbs.append(ttfb)
            if self.result.completed >= self.max_requests:
                self.full.set()

    def fail(self, why: str) -> None:
        if self.start <= time.perf_counter() <= self.end:
            self.result.errors += 1
            self.result.first_error = self.result.first_error or why


async def _one(session: aiohttp.ClientSession, url: str, body: bytes, t0: float) -> float:
    """Send one request and read it to the end; returns the time to first body byte."""
    ttfb = math.nan
    tail = b""
    completed = False  # a Responses stream ends with response.completed, not [DONE]
    marker = _MESSAGE_STOP if url.endswith("/v1/messages") else \
        _FINISHED if _GEMINI in url else _COMPLETED
    async with session.post(url, data=body,
                            headers={"content-type": "application/json"}) as resp:
        async for data in resp.content.iter_any():
            if math.isnan(ttfb):
                ttfb = time.perf_counter() - t0
            completed = completed or marker in tail + data[:len(marker)] or marker in data
            tail = (tail + data)[-len(marker):]
        status, ctype = resp.status, resp.headers.get("content-type", "")
    if status != 200:
        raise ValueError(f"HTTP {status}")
    if ctype.startswith("text/event-stream") and not tail.endswith(_DONE) and not completed:
        raise ValueError(f"stream did not end with [DONE], response.completed or "
                         f"message_stop: {tail!r}")
    return ttfb


async def _worker(session: aiohttp.ClientSession, url: str, body: bytes,
                  win: _Window, delay: float) -> None:
    await asyncio.sleep(delay)
    while not win.stopping:
        t0 = time.perf_counter()
        win.in_flight += 1
        try:
            ttfb = await _one(session, url, body, t0)
        except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
            win.fail(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(0.01)  # no hot loop against a dead target
            continue
        finally:
            win.in_flight -= 1
        t1 = time.perf_counter()
        win.record(t1, t1 - t0, ttfb)


async def run_load(base_url: str, spec: LoadSpec,
                   probe: WindowProbe | None = None) -> LoadResult:
    """One warmup + measured window against `base_url` (e.g. http://127.0.0.1:8080)."""
    url = base_url.rstrip("/") + _PATHS[spec.api].format(
        model=spec.model, method="streamGenerateContent?alt=sse" if spec.stream
        else "generateContent")
    body = request_body(spec)
    win = _Window(LoadResult(), spec.max_requests)
    connector = aiohttp.TCPConnector(limit=spec.concurrency + 16, force_close=False)
    timeout = aiohttp.ClientTimeout(total=spec.timeout)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     auto_decompress=False) as session:
        workers = [asyncio.create_task(
            _worker(session, url, body, win, spec.ramp * i / spec.concurrency))
            for i in range(spec.concurrency)]
        try:
            await _measure(win, spec, probe)
            win.stopping = True
            await asyncio.wait(workers, timeout=spec.drain)
            _count_unanswered(win, spec.drain)
        finally:
            win.stopping = True
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
    return win.result


def _count_unanswered(win: _Window, drain: float) -> None:
    # A request the target never answers fails neither inside the window nor after it;
    # without this a hung target would show 0 answers and 0 errors.
    if win.in_flight:
        win.result.errors += win.in_flight
        win.result.first_error = win.result.first_error or (
            f"{win.in_flight} requests unanswered {drain:g} s after the window closed")


async def _measure(win: _Window, spec: LoadSpec, probe: WindowProbe | None) -> None:
    await asyncio.sleep(spec.warmup)
    if probe is not None:
        probe.start()
    win.start = time.perf_counter()
    try:
        await asyncio.wait_for(win.full.wait(), timeout=spec.duration)
    except TimeoutError:
        pass
    win.end = time.perf_counter()
    if probe is not None:
        probe.stop()
    win.result.seconds = win.end - win.start


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop when installed: it roughly halves the load generator's CPU per request."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def main() -> None:
    parser = argparse.ArgumentParser(description="One closed-loop load run; prints JSON.")
    parser.add_argument("url", help="base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--model", default="bench-small")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--tools", action="store_true", help="offer 3 tools")
    parser.add_argument("-c", "--concurrency", type=int, default=1)
    parser.add_argument("-d", "--duration", type=float, default=3.0)
    parser.add_argument("-n", "--max-requests", type=int, default=1_000_000)
    parser.add_argument("--api", choices=tuple(_PATHS), default="chat",
                        help="POST /v1/chat/completions (default), /v1/responses, "
                             "/v1/messages or /v1beta/models/M:streamGenerateContent")
    args = parser.parse_args()
    spec = LoadSpec(args.model, args.stream, args.concurrency, args.tools,
                    args.duration, max_requests=args.max_requests, api=args.api)
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        result = runner.run(run_load(args.url, spec))
    print(orjson.dumps(result.summary(), option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
