"""opencode, Qwen Code, Continue's `cn` and Codex, headless, through a real toolshim
(its own process, uvicorn on loopback) against a scripted model in four behaviours
(support/scripted_agents.py): each agent reads a file and reports what it says, and
creates a file with its own file-writing tool (Codex: apply_patch). The test checks
the workspace and the agent's final output; toolshim's log is kept on failure (its
path is in the message). Setups come from support/agent_setups.py, which
docs/agents.md shows.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agent_setups import PINS, AgentSetup, all_setups
from support.agent_toolshim import AGENTS_DIR, KEY, MODEL, scripted_toolshim
from support.scripted_agents import BEHAVIOURS, ScriptedAgentModel

pytestmark = pytest.mark.agents

ROOT = Path(__file__).resolve().parents[2]
WRITE_TOOLS = {"opencode": "write", "qwen": "write_file", "cn": "Write", "codex": "apply_patch"}


CHAT_AGENTS = [s.binary for s in all_setups("", MODEL, KEY) if not s.serve]
"""the agents that need nothing of toolshim but its URL and key (Claude Code and Gemini
CLI, which need an alias for their vendor's model names, have files of their own)."""


@pytest.fixture(scope="session")
def agent_bin() -> Path:
    """node_modules/.bin with the pinned agents, installed once (cached between runs)."""
    bin_dir = AGENTS_DIR / "node_modules" / ".bin"
    if all((bin_dir / name).exists() for name in PINS):
        return bin_dir
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the agents tier needs it to install the agents")
    script = ROOT / "scripts" / "agents.sh"
    if script.exists():
        subprocess.run([str(script)], check=True, timeout=900)
    missing = [pin for name, pin in PINS.items() if not (bin_dir / name).exists()]
    if missing:  # pins not (yet) in scripts/agents.sh
        subprocess.run(["npm", "install", "--prefix", str(AGENTS_DIR), "--no-audit",
                        "--no-fund", "--loglevel=error", *missing], check=True, timeout=900)
    return bin_dir


@pytest.fixture(scope="module", params=BEHAVIOURS)
def toolshim(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[tuple[str, ScriptedAgentModel, Path]]:
    """The scripted model in one behaviour, and toolshim in front of it (its log kept)."""
    tmp = tmp_path_factory.mktemp(f"toolshim-{request.param}")
    with scripted_toolshim(request.param, tmp, None) as running:
        yield running


def _run(bin_dir: Path, base: str, binary: str, prompt: str, tmp: Path
         ) -> tuple[subprocess.CompletedProcess[str], Path, float]:
    home, workspace = tmp / "home", tmp / "work"
    home.mkdir()
    workspace.mkdir(exist_ok=True)
    setup: AgentSetup = {s.binary: s for s in all_setups(base, MODEL, KEY, str(home))}[binary]
    for relative, content in setup.files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(content)
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TERM") if k in os.environ}
    command = setup.command(prompt)
    command[0] = str(bin_dir / binary)
    # One cache for every run: opencode installs its provider package from npm into it
    # once, not into each fresh HOME.
    keep["XDG_CACHE_HOME"] = str(AGENTS_DIR / "cache")
    started = time.monotonic()
    run = subprocess.run(command, cwd=workspace, env={**keep, "HOME": str(home), **setup.env},
                         capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL,
                         check=False)
    return run, workspace, time.monotonic() - started


def _why(run: subprocess.CompletedProcess[str], log: Path, seconds: float) -> str:
    return (f"exit {run.returncode} after {seconds:.1f}s\nstdout: {run.stdout[-3000:]}\n"
            f"stderr: {run.stderr[-3000:]}\ntoolshim log (kept at {log}):\n"
            f"{log.read_text()[-6000:]}")


@pytest.mark.parametrize("binary", CHAT_AGENTS)
def test_agent_reads_a_file_and_reports_it(agent_bin: Path, binary: str, tmp_path: Path,
                                           toolshim: tuple[str, ScriptedAgentModel, Path]
                                           ) -> None:
    base, _, log = toolshim
    (tmp_path / "work").mkdir()
    notes = tmp_path / "work" / "notes.txt"
    notes.write_text("walrus-7319-copper\n")
    run, _, seconds = _run(agent_bin, base, binary, f"Read the file {notes} and tell me "
                           "what it says.", tmp_path)
    why = _why(run, log, seconds)
    assert run.returncode == 0, why
    assert "walrus-7319-copper" in run.stdout, why  # only the file holds this token


@pytest.mark.parametrize("binary", CHAT_AGENTS)
def test_agent_creates_a_file_with_its_write_tool(agent_bin: Path, binary: str,
                                                  tmp_path: Path,
                                                  toolshim: tuple[str, ScriptedAgentModel, Path]
                                                  ) -> None:
    base, model, log = toolshim
    target = tmp_path / "work" / "created.txt"
    before = len(model.requests)
    run, _, seconds = _run(agent_bin, base, binary,
                           f"Create the file {target} containing exactly: heron-5521-violet",
                           tmp_path)
    why = _why(run, log, seconds)
    assert run.returncode == 0, why
    assert target.exists() and target.read_text().strip() == "heron-5521-violet", why
    assert "Done" in run.stdout, why
    offered = [r for r in model.requests[before:] if r.get("tools")]
    if model.behaviour != "refusing":  # its tools reached the model as tools
        names = {t["function"]["name"] for r in offered for t in r["tools"]}
        assert WRITE_TOOLS[binary] in names, why
