"""toolshim with a timestamp at each phase of a request: where one request's time goes.

A profiler samples CPU; at one client at a time what matters is the request's own
path, waits included. This runs the proxy (same arguments as `python -m proxy`)
with marks patched in at fixed points: the request's bytes arriving, the upstream
request written, the upstream's first bytes, the client's answer written, the
request's end. `PHASE_MARKS` adds marks at the entry and exit of any function or
method, as `module:name` or `module:Class.method` (space-separated). At exit
(SIGTERM from the harness) it writes the median time between consecutive marks,
in the order they are reached, to `PHASE_OUT` (default phases.txt):

    python bench/run.py --only "W1 small c=1" --no-naive --rounds 1 --duration 3 \\
      --proxy-cmd "{python} bench/phases.py --host 127.0.0.1 --port {port} \\
      --upstream {upstream} --capabilities {caps}"

Each mark costs ~1 us, so the phases add up to a little more than the request.
A measuring tool, not a test: the names patched are internals and may move.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import inspect
import itertools
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http import httptools_impl

from proxy.asgi import client_timeouts
from proxy.backends import wire, wire_connection
from proxy.cli import main
from proxy.middleware.edge import Edge

_SKIP = 200
"""requests left out at the start (warm-up)."""
_FIXED = ("in", "upstream write", "upstream in", "out", "done")

now = time.perf_counter_ns
current: dict[str, int] = {}
finished: list[dict[str, int]] = []


def mark(name: str) -> None:
    current.setdefault(name, now())


def _patch(owner: Any, name: str, make: Callable[[Any], Any]) -> None:
    setattr(owner, name, make(getattr(owner, name)))


def _fixed_marks() -> None:
    def arrival(original: Any) -> Any:
        def data_received(self: Any, data: bytes) -> None:
            current.clear()
            current["in"] = now()
            original(self, data)
        return data_received

    def upstream_write(original: Any) -> Any:
        async def answered(self: Any, *args: Any) -> Any:
            mark("upstream write")
            return await original(self, *args)
        return answered

    def upstream_in(original: Any) -> Any:
        def data_received(self: Any, data: bytes) -> None:
            mark("upstream in")
            original(self, data)
        return data_received

    def sent(original: Any) -> Any:
        async def send(self: Any, message: Any) -> None:
            await original(self, message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                mark("out")  # the answer's last piece has been written
        return send

    def ended(original: Any) -> Any:
        async def call(self: Any, scope: Any, receive: Any, send: Any) -> None:
            try:
                await original(self, scope, receive, send)
            finally:
                if scope["type"] == "http" and "in" in current:
                    current["done"] = now()
                    finished.append(dict(current))
        return call

    _patch(client_timeouts.HeaderTimeoutProtocol, "data_received", arrival)
    _patch(wire.WireTransport, "_answered", upstream_write)
    _patch(wire_connection.Connection, "data_received", upstream_in)
    _patch(httptools_impl.RequestResponseCycle, "send", sent)
    _patch(Edge, "__call__", ended)


def _marked(target: str) -> None:
    """Marks at the entry and exit of `module:qualified.name`."""
    module_name, _, qualname = target.partition(":")
    owner: Any = importlib.import_module(module_name)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            mark(qualname)
            result = await original(*args, **kwargs)
            mark(qualname + " end")
            return result
    else:
        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            mark(qualname)
            result = original(*args, **kwargs)
            mark(qualname + " end")
            return result
    setattr(owner, name, wrapper)


def report() -> str:
    """Median microseconds between consecutive marks, in the order requests reach them."""
    rows = [r for r in finished if all(k in r for k in _FIXED)][_SKIP:]
    if not rows:
        return "no whole requests were timed\n"
    # Marks most requests reach, ordered by when they come (a mark on a path only
    # some requests take is left out).
    names = {name for row in rows for name in row}
    names = {n for n in names if sum(n in row for row in rows) > 0.9 * len(rows)}
    order = sorted(names, key=lambda n: statistics.median(r[n] - r["in"] for r in rows if n in r))
    rows = [r for r in rows if all(n in r for n in order)]
    lines = [f"{len(rows)} requests; median us between marks"]
    for first, then in itertools.pairwise(order):
        spent = statistics.median((r[then] - r[first]) / 1000 for r in rows)
        lines.append(f"{spent:8.1f}  {first} -> {then}")
    gaps = [(b["in"] - a["done"]) / 1000 for a, b in itertools.pairwise(rows)]
    lines.append(f"{statistics.median(gaps):8.1f}  done -> the next request's bytes")
    return "\n".join(lines) + "\n"


def _write_report() -> None:
    with open(os.environ.get("PHASE_OUT", "phases.txt"), "w") as out:
        out.write(report())


if __name__ == "__main__":
    _fixed_marks()
    for target in os.environ.get("PHASE_MARKS", "").split():
        _marked(target)
    atexit.register(_write_report)
    sys.argv = ["toolshim", *sys.argv[1:]]
    sys.exit(main())
