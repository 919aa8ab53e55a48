"""docs/agents.md shows each agent's setup exactly as the agents tier runs it: every
command line and config file, rendered from support/agent_setups.py with the doc's
values, is found verbatim in the page."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.agent_setups import PINS, AgentSetup, all_setups

DOC = Path(__file__).resolve().parents[2] / "docs" / "agents.md"
SETUPS = all_setups("http://127.0.0.1:8080", "qwen3-coder:30b", "sk-local", "/home/me")


@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: s.binary)
def test_the_doc_shows_the_tiers_command_and_files(setup: AgentSetup) -> None:
    text = DOC.read_text()
    assert f"```sh\n{setup.shell()}\n```" in text
    if setup.serve:  # what toolshim itself needs for this agent
        assert f"```sh\n{setup.toolshim('http://127.0.0.1:11434', 'sk-local')}\n```" in text
    for content in setup.files.values():
        assert content.rstrip() + "\n```" in text


def test_the_doc_names_every_pinned_version() -> None:
    text = DOC.read_text()
    assert all(f"(`{pin}`)" in text for pin in PINS.values())
