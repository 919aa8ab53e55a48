"""A real redis-server on a free loopback port with a temporary directory, for tests.

No persistence (`--save '' --appendonly no`), so a restart starts empty, as a
Redis that lost its data would. `kill()` is SIGKILL: the replicas see the
connection drop mid-run, not a polite shutdown.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.polling import until
from support.servers import free_port


def redis_server_path() -> str | None:
    return shutil.which("redis-server")


class RedisServer:
    def __init__(self, workdir: Path, extra: tuple[str, ...] = ()) -> None:
        self.workdir = workdir
        self.extra = extra
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = redis_server_path()
        assert binary is not None
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.workdir),
             "--save", "", "--appendonly", "no", "--protected-mode", "no", *self.extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        until(self._started, within=10, what="redis-server to start")

    def _started(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, "redis-server exited at start"
        return self._answers()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()  # SIGKILL ends a stopped process too
            self.proc.wait(timeout=10)
        self.proc = None

    def pause(self) -> None:
        """SIGSTOP: connections stay open and nothing answers (a hung or swamped Redis)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith((b"+PONG", b"-NOAUTH"))
        except OSError:
            return False


@contextmanager
def running_redis(workdir: Path, extra: tuple[str, ...] = ()) -> Iterator[RedisServer]:
    """A started server, killed at exit; skips the test if redis-server is not installed."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run does)")
    server = RedisServer(workdir, extra)
    server.start()
    try:
        yield server
    finally:
        server.kill()
