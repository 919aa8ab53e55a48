"""`toolshim` says `listening` only once its socket is bound; a port in use is one error
line and a non-zero exit (proxy/cli.py)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.servers import free_port, wait_until_ok


def _command(port: int, fake_url: str, caps: Path) -> list[str]:
    return [sys.executable, "-m", "proxy", "--host", "127.0.0.1", "--port", str(port),
            "--upstream", fake_url, "--capabilities", str(caps), "--no-probe",
            "--log-format", "json"]


def _lines(stderr: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]


def test_a_port_in_use_is_one_error_line_and_exit_1(fake_url: str, caps_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(_command(port, fake_url, caps_path), capture_output=True,
                              timeout=60, check=False)
    assert done.returncode == 1
    lines = _lines(done.stderr)
    errors = [line for line in lines if line["level"] in ("error", "ERROR", "critical")]
    assert len(errors) == 1, done.stderr.decode()
    assert errors[0]["msg"].startswith(f"cannot listen on 127.0.0.1:{port}: ")
    assert "in use" in errors[0]["msg"].lower()
    assert not any("listening" in line["msg"] for line in lines)
    assert b"Traceback" not in done.stderr


def test_listening_is_said_once_bound(fake_url: str, caps_path: Path, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "err.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(_command(port, fake_url, caps_path), stdout=subprocess.DEVNULL,
                                stderr=err)
        try:
            assert wait_until_ok(f"http://127.0.0.1:{port}/healthz", proc, what="the proxy")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(20)
    assert proc.returncode == 0
    starts = [line for line in _lines(log.read_bytes())
              if line["msg"].startswith("toolshim listening")]
    assert len(starts) == 1 and f"127.0.0.1:{port}" in starts[0]["msg"]
