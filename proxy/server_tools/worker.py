"""The process builtins run in: one call at a time, read from stdin, answered on stdout.

Owns: the child side of `proxy.server_tools.sandbox`. Each line in is
`{"builtin", "arguments", "timeout"}`, each line out `{"ok": text}` or
`{"error": message}`. The parent kills this process when a call outlives its
timeout; the limits set here are the backstop for when the parent cannot
(it was itself killed): the kernel ends a call that spends its CPU time
budget, memory is capped, and end of input (the parent gone) ends the loop.
Must not: import anything heavy (it starts on the first builtin call) or
react to the terminal's Ctrl-C (the parent decides when it ends).
"""

from __future__ import annotations

import signal
import sys
from typing import Any

import orjson

from proxy.server_tools import local

MEMORY_BYTES = 1 << 30
"""address space a worker may use: a runaway builtin fails with MemoryError, not the host."""


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _limit_memory()
    for line in sys.stdin.buffer:
        reply = answer(line)
        sys.stdout.buffer.write(orjson.dumps(reply) + b"\n")
        sys.stdout.buffer.flush()


def answer(line: bytes) -> dict[str, str]:
    try:
        request: dict[str, Any] = orjson.loads(line)
        _limit_cpu(float(request.get("timeout", 10)))
        return {"ok": local.run_builtin_named(str(request["builtin"]),
                                              dict(request["arguments"]))}
    except local.ToolError as exc:
        return {"error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a builtin bug is the model's error result
        return {"error": f"the tool failed ({exc.__class__.__name__})"}


def _limit_cpu(timeout: float) -> None:
    """This call may use the CPU seconds spent so far plus its timeout (and a margin):
    past that the kernel sends SIGXCPU, whose default action ends the process."""
    try:
        import resource
    except ImportError:  # not POSIX: the parent's kill is the only limit
        return
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = used.ru_utime + used.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(spent + timeout) + 2
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    except (ValueError, OSError):
        pass


def _limit_memory() -> None:
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard == resource.RLIM_INFINITY or hard > MEMORY_BYTES:
            resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, hard))
    except (ImportError, ValueError, OSError):
        pass


if __name__ == "__main__":
    main()
