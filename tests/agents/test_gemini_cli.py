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

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agent_toolshim import KEY, MODEL, explain, installed, logged, scripted_toolshim
from support.scripted_agents import BEHAVIOURS, ScriptedAgentModel

pytestmark = pytest.mark.agents

Scripted = tuple[str, ScriptedAgentModel, Path]
SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}}


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    return installed("gemini")


@pytest.fixture(params=BEHAVIOURS)
def toolshim(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Scripted]:
    with scripted_toolshim(request.param, tmp_path, "gemini-*") as running:
        yield running


def _gemini_env(base_url: str, home: Path) -> dict[str, str]:
    """What a user sets to run Gemini CLI against toolshim, offline."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TERM") if k in os.environ}
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(SETTINGS))
    return {**keep, "HOME": str(home), "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_API_KEY": KEY, "GEMINI_CLI_TRUST_WORKSPACE": "true"}


def _gemini(gemini_bin: Path, base_url: str, prompt: str, tmp_path: Path
            ) -> subprocess.CompletedProcess[str]:
    workspace, home = tmp_path / "work", tmp_path / "home"
    workspace.mkdir(exist_ok=True)
    home.mkdir()
    return subprocess.run(
        [str(gemini_bin), "-p", prompt, "-m", "gemini-2.5-pro", "--approval-mode", "yolo"],
        check=False, cwd=workspace, env=_gemini_env(base_url, home), capture_output=True,
        text=True, timeout=180)


def test_gemini_cli_reads_a_file_and_reports_it(gemini_bin: Path, toolshim: Scripted,
                                                tmp_path: Path) -> None:
    base_url, model, log = toolshim
    (tmp_path / "work").mkdir()
    notes = tmp_path / "work" / "notes.txt"
    notes.write_text("walrus-7319-copper\n")
    run = _gemini(gemini_bin, base_url, f"Read the file {notes} and tell me what it says.",
                  tmp_path)
    why = explain("gemini", run, log)
    assert run.returncode == 0, why
    assert "walrus-7319-copper" in run.stdout, why  # only the file holds this token
    _check_route(model, log, "read_file", why)


def test_gemini_cli_creates_a_file_with_its_write_tool(gemini_bin: Path, toolshim: Scripted,
                                                       tmp_path: Path) -> None:
    base_url, model, log = toolshim
    target = tmp_path / "work" / "created.txt"
    run = _gemini(gemini_bin, base_url,
                  f"Create the file {target} containing exactly: heron-5521-violet", tmp_path)
    why = explain("gemini", run, log)
    assert run.returncode == 0, why
    assert target.exists() and target.read_text().strip() == "heron-5521-violet", why
    assert "Done" in run.stdout, why
    _check_route(model, log, "write_file", why)


def _check_route(model: ScriptedAgentModel, log: Path, tool: str, why: str) -> None:
    """The agent's own tool was offered; every Gemini name was aliased; the call went
    through the Gemini door, and a call written as text (or emulated for the refusing
    backend) was recovered into a functionCall."""
    offered = {t["function"]["name"] for r in model.requests for t in r.get("tools") or []}
    assert tool in offered, why
    assert {r["model"] for r in model.requests} == {MODEL}, why
    assert logged(log, "endpoint=gemini"), why
    if model.behaviour == "refusing":
        assert logged(log, "rung=emulate"), why
    if model.behaviour != "native":
        assert logged(log, "calls_recovered=1"), why
