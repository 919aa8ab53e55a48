"""Start toolshim replicas as real processes (`python -m proxy ...`) and stop them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from support.servers import free_port


@dataclass
class Replica:
    proc: subprocess.Popen[bytes]
    url: str
    caps: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


def start_replicas(count: int, upstream: str, redis_url: str, workdir: Path,
                   extra: Sequence[str] = ()) -> list[Replica]:
    """`count` replicas, each with its own capabilities file, all started before waiting."""
    started = []
    for n in range(count):
        caps = workdir / f"replica{n}" / "capabilities.yaml"
        caps.parent.mkdir(parents=True, exist_ok=True)
        caps.write_text("version: 1\n")
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--port", str(port), "--upstream", upstream,
             "--capabilities", str(caps), "--redis-url", redis_url, "--reload-interval", "0.1",
             "--shutdown-grace", "1", "--log-level", "warning", *extra],
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
        started.append(Replica(proc, f"http://127.0.0.1:{port}", caps))
    try:
        for replica in started:
            _wait_healthy(replica)
    except BaseException:
        stop_all(started)
        raise
    return started


def stop_all(replicas: Sequence[Replica]) -> None:
    for replica in replicas:
        replica.proc.send_signal(signal.SIGTERM) if replica.proc.poll() is None else None
    for replica in replicas:
        replica.stop()


def _wait_healthy(replica: Replica) -> None:
    deadline = time.monotonic() + 40
    while True:
        assert replica.proc.poll() is None, "replica exited at start"
        try:
            if httpx.get(replica.url + "/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "replica did not start"
        time.sleep(0.1)
