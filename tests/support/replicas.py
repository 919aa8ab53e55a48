"""Start toolshim replicas as real processes (`python -m proxy ...`) and stop them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from support.servers import free_port, wait_until_ok


@dataclass
class Replica:
    proc: subprocess.Popen[bytes]
    url: str
    caps: Path
    args: list[str]

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
    started: list[Replica] = []
    try:
        for n in range(count):
            caps = workdir / f"replica{n}" / "capabilities.yaml"
            caps.parent.mkdir(parents=True, exist_ok=True)
            caps.write_text("version: 1\n")
            args = ["--upstream", upstream, "--capabilities", str(caps), "--redis-url",
                    redis_url, "--reload-interval", "0.1", "--shutdown-grace", "1",
                    "--log-level", "warning", *extra]
            started.append(_launch(args, caps))
        for n, replica in enumerate(started):
            for _ in range(3):  # a free port can be taken by someone else before we bind it
                if _wait_healthy(replica):
                    break
                started[n] = replica = _launch(replica.args, replica.caps)
            else:
                raise AssertionError("replica did not start")
    except BaseException:
        stop_all(started)
        raise
    return started


def _launch(args: list[str], caps: Path) -> Replica:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "proxy", "--port", str(port), *args],
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return Replica(proc, f"http://127.0.0.1:{port}", caps, args)


def stop_all(replicas: Sequence[Replica]) -> None:
    for replica in replicas:
        replica.proc.send_signal(signal.SIGTERM) if replica.proc.poll() is None else None
    for replica in replicas:
        replica.stop()


def _wait_healthy(replica: Replica) -> bool:
    """True once it answers; False if it exited (e.g. its port was taken)."""
    return wait_until_ok(replica.url + "/healthz", replica.proc, timeout=40, what="replica")
