"""The agents tier's plumbing for Claude Code and Gemini CLI: the agent installed from
npm, the scripted model (support/scripted_agents.py) in one behaviour, and toolshim as
its own process (uvicorn on loopback) in front of it, its log kept for failures."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import pytest

from support.polling import until
from support.scripted_agents import ScriptedAgentModel
from support.servers import free_port, serve, wait_until_ok

ROOT = Path(__file__).resolve().parents[2]
AGENTS_DIR = Path(os.environ.get("TOOLSHIM_AGENTS_DIR", ROOT / ".agents"))
MODEL = "qwen3-coder:30b"
KEY = "sk-toolshim-agents"


def installed(binary: str) -> Path:
    """The agent's executable, installed by scripts/agents.sh (cached between runs)."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the agents tier needs it to install the agents")
    subprocess.run([str(ROOT / "scripts" / "agents.sh")], check=True, timeout=600)
    found = AGENTS_DIR / "node_modules" / ".bin" / binary
    assert found.exists(), f"scripts/agents.sh did not install {binary} into {AGENTS_DIR}"
    return found


@contextmanager
def scripted_toolshim(behaviour: str, tmp: Path, alias: str | None
                      ) -> Iterator[tuple[str, ScriptedAgentModel, Path]]:
    """(toolshim's base URL, the scripted model, toolshim's log) while both run; toolshim
    maps the agent's own model names (`alias`, a glob) to the local model."""
    model = ScriptedAgentModel(behaviour, MODEL)
    caps, log = tmp / "capabilities.yaml", tmp / "toolshim.log"
    caps.write_text("version: 1\n")
    more = ["--alias", f"{alias}={MODEL}"] if alias else []
    with serve(model.app, lifespan="off") as upstream, log.open("wb") as out:
        base, proc = _start(["--upstream", upstream, "--capabilities", str(caps),
                             "--api-key", KEY, *more, "--log-format", "text"], out, log, tmp)
        try:
            yield base, model, log
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def _start(args: list[str], out: IO[bytes], log: Path, tmp: Path
           ) -> tuple[str, subprocess.Popen[bytes]]:
    """toolshim on a free port, answering /healthz. A port found free can be taken by
    another process before toolshim binds it (toolshim then exits at once, saying so):
    another port is tried, three times at most."""
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--host", "127.0.0.1", "--port", str(port), *args],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=tmp)
        if wait_until_ok(f"http://127.0.0.1:{port}/healthz", proc):
            return f"http://127.0.0.1:{port}", proc
        proc.kill()
        proc.wait(timeout=10)
        if "cannot listen" not in log.read_text():
            break
    raise AssertionError(log.read_text())


def explain(name: str, run: subprocess.CompletedProcess[str], log: Path) -> str:
    """A failure message: the agent's output and toolshim's log (and where it is kept)."""
    return (f"{name} exited {run.returncode}\nstdout: {run.stdout[-3000:]}\n"
            f"stderr: {run.stderr[-3000:]}\ntoolshim log (kept at {log}):\n"
            f"{log.read_text()[-8000:]}")


def logged(log: Path, *needles: str, within: float = 5.0) -> bool:
    """Whether toolshim's log comes to hold every needle: its request line is written
    after the response ended, so it can land just after the agent exited."""
    try:
        until(lambda: all(n in log.read_text() for n in needles), within=within,
              what=f"toolshim's log to hold {needles}")
    except AssertionError:
        return False  # the caller fails with the agent's whole story, not just this wait
    return True
