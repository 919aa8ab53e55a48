"""The two tasks Claude Code and Gemini CLI are given in the agents tier, and what the
test then checks of toolshim's side: one body for both agents, so that they are held to
the same thing (each test file keeps only how its agent is started).

An agent runs once per task, headless, in `tmp`/work with a fresh HOME `tmp`/home. It
reads a file with its own read tool and reports a token only that file holds, and it
creates a file with its own write tool.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from support.agent_toolshim import MODEL, explain, logged
from support.scripted_agents import ScriptedAgentModel

# Sends the agent one prompt and waits for it to exit.
Ask = Callable[[str], "subprocess.CompletedProcess[str]"]


def run_headless(argv: list[str], env: Callable[[Path], dict[str, str]], tmp: Path
                 ) -> subprocess.CompletedProcess[str]:
    """Run the agent once in `tmp`/work, with the environment `env` sets up in a fresh
    HOME at `tmp`/home."""
    workspace, home = tmp / "work", tmp / "home"
    workspace.mkdir(exist_ok=True)
    home.mkdir()
    return subprocess.run(argv, check=False, cwd=workspace, env=env(home),
                          capture_output=True, text=True, timeout=180)


def reads_a_file_and_reports_it(ask: Ask, name: str, log: Path, tmp: Path) -> str:
    """The read task; returns the failure message the route checks use."""
    (tmp / "work").mkdir()
    notes = tmp / "work" / "notes.txt"
    notes.write_text("walrus-7319-copper\n")
    run = ask(f"Read the file {notes} and tell me what it says.")
    why = explain(name, run, log)
    assert run.returncode == 0, why
    assert "walrus-7319-copper" in run.stdout, why  # only the file holds this token
    return why


def creates_a_file(ask: Ask, name: str, log: Path, tmp: Path) -> str:
    """The write task; returns the failure message the route checks use."""
    target = tmp / "work" / "created.txt"
    run = ask(f"Create the file {target} containing exactly: heron-5521-violet")
    why = explain(name, run, log)
    assert run.returncode == 0, why
    assert target.exists() and target.read_text().strip() == "heron-5521-violet", why
    assert "Done" in run.stdout, why
    return why


def check_route(model: ScriptedAgentModel, log: Path, tool: str, why: str,
                *always_logged: str) -> None:
    """The agent's own `tool` was offered; every model name it asked for was aliased to
    the local model; toolshim's log holds `always_logged`; a call written as text (or
    emulated for the refusing backend) was recovered into the agent's own call shape."""
    offered = {t["function"]["name"] for r in model.requests for t in r.get("tools") or []}
    assert tool in offered, why
    assert {r["model"] for r in model.requests} == {MODEL}, why
    for needle in always_logged:
        assert logged(log, needle), why
    if model.behaviour == "refusing":
        assert logged(log, "rung=emulate"), why
    if model.behaviour != "native":
        assert logged(log, "calls_recovered=1"), why
