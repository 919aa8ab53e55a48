"""Worker processes for builtins: every builtin call runs off the event loop, killable.

Owns: a few reused child processes (`proxy.server_tools.worker`), started on
demand, one call at a time each. A call that is cancelled (its timeout fired,
its client left) kills its worker, so a runaway builtin ends at its timeout
while the event loop goes on, and the next call gets a fresh worker. A
thread could not do this (it cannot be killed); a process can.

The workers are started with `asyncio.create_subprocess_exec` (fork + exec of
a fresh interpreter), not multiprocessing's `fork`: forking a process that
runs an event loop and threads copies their locks in whatever state they are.
`-I` keeps toolshim's environment (API keys, TOOLSHIM_*) out of the child:
it gets the parent's import path and nothing else.

Must not: block the event loop, leave a child behind after `aclose()`, or
let one call's answer be read by another (a killed worker is never reused).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import orjson

from proxy.server_tools.local import ToolError

WORKER_MODULE = "proxy.server_tools.worker"
"""the module a worker runs (`main()`); tests swap in one with a builtin that never ends."""
REPLY_LIMIT = 16 << 20
"""bytes of one answer line; `echo` returns its arguments, which a request bounds already."""
_BOOT = ("import sys, runpy; sys.path[:0] = sys.argv[1:]; "
         "runpy.run_module({module!r}, run_name='__main__')")


class Sandbox:
    """Up to `size` worker processes, reused while they behave."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._slots: asyncio.Semaphore | None = None
        self._idle: list[asyncio.subprocess.Process] = []
        self._live: set[asyncio.subprocess.Process] = set()
        self._reaping: set[asyncio.Task[Any]] = set()
        self._closed = False

    async def run(self, builtin: str, arguments: dict[str, Any], timeout: float) -> str:
        """The builtin's text, or ToolError. The caller's deadline (asyncio.wait_for)
        cancels this; cancelling kills the worker, whatever it was doing."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        async with self._slots:
            worker = self._idle.pop() if self._idle else await self._start()
            try:
                reply = await _ask(worker, builtin, arguments, timeout)
            except BaseException:
                self._kill(worker)
                raise
            self._idle.append(worker)
        if "ok" in reply:
            return str(reply["ok"])
        raise ToolError(str(reply.get("error", "the tool failed")))

    async def _start(self) -> asyncio.subprocess.Process:
        if self._closed:
            raise ToolError("toolshim is shutting down")
        boot = _BOOT.format(module=WORKER_MODULE)
        worker = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-c", boot, *_import_path(),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env={"PATH": os.environ.get("PATH", os.defpath)}, limit=REPLY_LIMIT)
        self._live.add(worker)
        return worker

    def _kill(self, worker: asyncio.subprocess.Process) -> None:
        """Kill without waiting (this may run in a cancelled task); reap it in the back."""
        if worker.returncode is None:
            worker.kill()
        task = asyncio.ensure_future(self._reap(worker))
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def _reap(self, worker: asyncio.subprocess.Process) -> None:
        try:
            await worker.wait()
        finally:
            self._live.discard(worker)

    async def aclose(self) -> None:
        """Kill every worker and wait for each to be gone."""
        self._closed = True
        self._idle.clear()
        for worker in list(self._live):
            self._kill(worker)
        await asyncio.gather(*self._reaping, return_exceptions=True)


async def _ask(worker: asyncio.subprocess.Process, builtin: str, arguments: dict[str, Any],
               timeout: float) -> dict[str, Any]:
    assert worker.stdin is not None and worker.stdout is not None
    worker.stdin.write(orjson.dumps({"builtin": builtin, "arguments": arguments,
                                     "timeout": timeout}) + b"\n")
    try:
        await worker.stdin.drain()
        line = await worker.stdout.readline()
    except (ConnectionError, ValueError):  # it died, or its answer is past REPLY_LIMIT
        raise _Broken("the tool's worker process failed") from None
    if not line:
        raise _Broken("the tool's worker process ended (it ran out of time or memory)")
    reply = orjson.loads(line)
    assert isinstance(reply, dict)
    return reply


class _Broken(ToolError):
    """A worker that cannot be reused: killed by `run` like a timed-out one."""


def _import_path() -> list[str]:
    """Where the worker finds `proxy` and what it imports: where this process finds them."""
    return [p or os.getcwd() for p in sys.path]
