"""toolshim as its own process (uvicorn on loopback) in front of a scripted model, for
the agents tier: the one place the Claude Code and Gemini CLI tests start it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.servers import free_port, wait_until_ok

ROOT = Path(__file__).resolve().parents[2]
AGENTS_DIR = Path(os.environ.get("TOOLSHIM_AGENTS_DIR", ROOT / ".agents"))
MODEL = "qwen3-coder:30b"
KEY = "sk-toolshim-agents"


@contextmanager
def toolshim_process(upstream: str, tmp: Path, alias: str) -> Iterator[tuple[str, Path]]:
    """(base URL, log path) while toolshim runs with `--alias alias=MODEL`; the log stays in
    `tmp` so a failing test can show it."""
    caps, log = tmp / "capabilities.yaml", tmp / "toolshim.log"
    caps.write_text("version: 1\n")
    port = free_port()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--host", "127.0.0.1", "--port", str(port),
             "--upstream", upstream, "--capabilities", str(caps), "--api-key", KEY,
             "--alias", f"{alias}={MODEL}", "--log-format", "text"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=tmp)
        try:
            assert wait_until_ok(f"http://127.0.0.1:{port}/healthz", proc), log.read_text()
            yield f"http://127.0.0.1:{port}", log
        finally:
            proc.terminate()
            proc.wait(timeout=10)
