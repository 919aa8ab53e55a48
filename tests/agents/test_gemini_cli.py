"""Gemini CLI itself, headless, through a real toolshim against a scripted model.

The `gemini` CLI from npm (`@google/gemini-cli`, pinned in scripts/agents.sh) runs
`gemini -p ... --approval-mode yolo` in a fresh HOME whose settings file selects
gemini-api-key auth and turns telemetry and updates off, pointed at toolshim (its own
process, uvicorn on loopback) by GOOGLE_GEMINI_BASE_URL; toolshim's upstream is the
scripted model (support/scripted_agents.py) in each of its behaviours: native calls,
Hermes text, Qwen3-Coder XML, and a backend that refuses tools with Ollama's 400
(toolshim then emulates them). It reads a file with its read_file tool and reports
what it says, and creates a file with its write_file tool; the test checks the
workspace and the final output. Gemini CLI's helper calls ask for Gemini model names;
toolshim's `--alias gemini-*=...` maps them to the local model.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from support.agent_setups import agent_env, alias_of, gemini_cli
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
def gemini_bin() -> Path:
    return installed("gemini")


@pytest.fixture(params=BEHAVIOURS)
def toolshim(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scripted]:
    with scripted_toolshim(request.param, tmp_path, alias_of(gemini_cli("", MODEL, KEY))
                           ) as running:
        yield running


def _gemini(gemini_bin: Path, base_url: str, prompt: str, tmp_path: Path
            ) -> subprocess.CompletedProcess[str]:
    """Gemini CLI as docs/agents.md shows it (support/agent_setups.gemini_cli)."""
    setup = gemini_cli(base_url, MODEL, KEY)
    return run_headless([str(gemini_bin), *setup.command(prompt)[1:]],
                        partial(agent_env, setup), tmp_path)


def test_gemini_cli_reads_a_file_and_reports_it(gemini_bin: Path, toolshim: Scripted,
                                                tmp_path: Path) -> None:
    base_url, model, log = toolshim
    ask = partial(_gemini, gemini_bin, base_url, tmp_path=tmp_path)
    why = reads_a_file_and_reports_it(ask, "gemini", log, tmp_path)
    # Gemini CLI speaks the Gemini door: its request lines say so.
    check_route(model, log, "read_file", why, "endpoint=gemini")


def test_gemini_cli_creates_a_file_with_its_write_tool(gemini_bin: Path, toolshim: Scripted,
                                                       tmp_path: Path) -> None:
    base_url, model, log = toolshim
    ask = partial(_gemini, gemini_bin, base_url, tmp_path=tmp_path)
    why = creates_a_file(ask, "gemini", log, tmp_path)
    check_route(model, log, "write_file", why, "endpoint=gemini")

