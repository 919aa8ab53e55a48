"""Claude Code and Gemini CLI themselves, headless, through a real toolshim against a
scripted model: the agents that speak their vendor's own API (the Messages door, the
Gemini door) and ask for their vendor's model names, which toolshim's `--alias` maps.

Each agent from npm (pinned in scripts/agents.sh) runs as docs/agents.md shows it
(support/agent_setups.py) in a fresh HOME, offline, pointed at toolshim (its own
process, uvicorn on loopback) whose upstream is the scripted model
(support/scripted_agents.py) in each of its behaviours: native calls, Hermes text,
Qwen3-Coder XML, and a backend that refuses tools with Ollama's 400 (toolshim then
emulates them). It reads a file with its own read tool and reports what it says, and
creates a file with its own write tool; the test checks the workspace, the final output
and toolshim's log (the door each request came through).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import pytest
from support.agent_setups import AgentSetup, agent_env, alias_of, claude_code, gemini_cli
from support.agent_tasks import (
    check_route,
    creates_a_file,
    reads_a_file_and_reports_it,
    run_headless,
)
from support.agent_toolshim import KEY, MODEL, installed, scripted_toolshim
from support.scripted_agents import BEHAVIOURS, ScriptedAgentModel

pytestmark = pytest.mark.agents

Scripted = tuple[str, ScriptedAgentModel, Path]


@dataclass(frozen=True)
class DoorAgent:
    setup: Callable[[str, str, str], AgentSetup]
    reads_with: str
    writes_with: str
    door: str
    """what toolshim's request line says of the door (`endpoint=...`)."""
    path: Path | None = None
    """the installed executable (the `agent` fixture finds it)."""

    @property
    def binary(self) -> str:
        return self.setup("", MODEL, KEY).binary


AGENTS = [DoorAgent(claude_code, "Read", "Write", "endpoint=messages"),
          DoorAgent(gemini_cli, "read_file", "write_file", "endpoint=gemini")]


@pytest.fixture(scope="module", params=AGENTS, ids=lambda a: a.binary)
def agent(request: pytest.FixtureRequest) -> DoorAgent:
    agent: DoorAgent = request.param
    # skips, saying why, when npm is not there to install the agent
    return replace(agent, path=installed(agent.binary))


@pytest.fixture(params=BEHAVIOURS)
def toolshim(request: pytest.FixtureRequest, agent: DoorAgent, tmp_path: Path
             ) -> Iterator[Scripted]:
    alias = alias_of(agent.setup("", MODEL, KEY))
    with scripted_toolshim(request.param, tmp_path, alias) as running:
        yield running


def _ask(agent: DoorAgent, base_url: str, tmp_path: Path, prompt: str
         ) -> subprocess.CompletedProcess[str]:
    """The agent exactly as docs/agents.md shows it."""
    setup = agent.setup(base_url, MODEL, KEY)
    command = [str(agent.path), *setup.command(prompt)[1:]]
    return run_headless(command, partial(agent_env, setup), tmp_path)


def test_the_agent_reads_a_file_and_reports_it(agent: DoorAgent, toolshim: Scripted,
                                               tmp_path: Path) -> None:
    base_url, model, log = toolshim
    why = reads_a_file_and_reports_it(partial(_ask, agent, base_url, tmp_path),
                                      agent.binary, log, tmp_path)
    check_route(model, log, agent.reads_with, why, agent.door)


def test_the_agent_creates_a_file_with_its_write_tool(agent: DoorAgent, toolshim: Scripted,
                                                      tmp_path: Path) -> None:
    base_url, model, log = toolshim
    why = creates_a_file(partial(_ask, agent, base_url, tmp_path), agent.binary, log,
                         tmp_path)
    check_route(model, log, agent.writes_with, why, agent.door)
