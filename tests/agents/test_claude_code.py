"""Claude Code itself, headless, through a real toolshim against a scripted model.

The `claude` CLI from npm (pinned in scripts/agents.sh) runs `claude -p ...` with
bypassed permissions in a fresh HOME, offline, pointed at toolshim (its own process,
uvicorn on loopback) whose upstream is the scripted model (support/scripted_agents.py)
in each of its behaviours: native calls, Hermes text, Qwen3-Coder XML, and a backend
that refuses tools with Ollama's 400 (toolshim then emulates them). It reads a file
with its Read tool and reports what it says, and creates a file with its Write tool;
the test checks the workspace and the final output. Claude Code asks for its own
model names; toolshim's `--alias` maps them to the local model.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from support.agent_setups import agent_env, alias_of, claude_code
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


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return installed("claude")


@pytest.fixture(params=BEHAVIOURS)
def toolshim(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scripted]:
    with scripted_toolshim(request.param, tmp_path, alias_of(claude_code("", MODEL, KEY))
                           ) as running:
        yield running


def _claude(claude_bin: Path, base_url: str, prompt: str, tmp_path: Path
            ) -> subprocess.CompletedProcess[str]:
    """Claude Code as docs/agents.md shows it (support/agent_setups.claude_code)."""
    setup = claude_code(base_url, MODEL, KEY)
    return run_headless([str(claude_bin), *setup.command(prompt)[1:]],
                        partial(agent_env, setup), tmp_path)


def test_claude_code_reads_a_file_and_reports_it(claude_bin: Path, toolshim: Scripted,
                                                 tmp_path: Path) -> None:
    base_url, model, log = toolshim
    ask = partial(_claude, claude_bin, base_url, tmp_path=tmp_path)
    why = reads_a_file_and_reports_it(ask, "claude", log, tmp_path)
    check_route(model, log, "Read", why)


def test_claude_code_creates_a_file_with_its_write_tool(claude_bin: Path, toolshim: Scripted,
                                                        tmp_path: Path) -> None:
    base_url, model, log = toolshim
    ask = partial(_claude, claude_bin, base_url, tmp_path=tmp_path)
    why = creates_a_file(ask, "claude", log, tmp_path)
    check_route(model, log, "Write", why)

