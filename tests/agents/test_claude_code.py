"""Claude Code itself, headless, through a real toolshim against a scripted model.

The `claude` CLI from npm (pinned in scripts/agents.sh) runs `claude -p ...` with
bypassed permissions in a fresh HOME, offline, pointed at toolshim (its own
process, uvicorn on loopback) whose upstream is the scripted model
(support/scripted_model.py behind the fake Ollama), or a backend that refuses
tools with Ollama's 400 (support/scripted_agents.py), on which toolshim emulates
them. The tasks make it read a file with its Read tool and write another with its
Write tool; the test checks the workspace, not only the answer text. Claude Code
asks for its own model names; toolshim's `--alias` maps them to the local model.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.agent_toolshim import AGENTS_DIR, KEY, MODEL, ROOT, toolshim_process
from support.fake_ollama import FakeOllama
from support.scripted_agents import ScriptedAgentModel
from support.scripted_model import play, play_as_text
from support.servers import serve

pytestmark = pytest.mark.agents


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the agents tier needs it to install the agents")
    subprocess.run([str(ROOT / "scripts" / "agents.sh")], check=True, timeout=600)
    found = AGENTS_DIR / "node_modules" / ".bin" / "claude"
    assert found.exists(), f"scripts/agents.sh did not install claude into {AGENTS_DIR}"
    return found


@pytest.fixture(params=["native", "text"])
def model(request: pytest.FixtureRequest) -> Iterator[tuple[FakeOllama, str]]:
    """The scripted model calling tools natively, or writing its calls as text."""
    fake = FakeOllama()
    fake.add_model(MODEL)
    fake.script = play if request.param == "native" else play_as_text
    with serve(fake.app, lifespan="off") as url:
        yield fake, url


@pytest.fixture
def toolshim(model: tuple[FakeOllama, str], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """toolshim as its own process; its log is kept in tmp_path (shown on failure)."""
    with toolshim_process(model[1], tmp_path, "claude-*") as running:
        yield running


@pytest.fixture
def refusing(tmp_path: Path) -> Iterator[tuple[str, ScriptedAgentModel, Path]]:
    """A backend that refuses `tools` with Ollama's 400, and toolshim in front of it."""
    backend = ScriptedAgentModel("refusing", MODEL)
    with serve(backend.app, lifespan="off") as upstream, \
            toolshim_process(upstream, tmp_path, "claude-*") as (base, log):
        yield base, backend, log


def _claude_env(base_url: str, home: Path) -> dict[str, str]:
    """What a user sets to run Claude Code against toolshim, offline."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TERM") if k in os.environ}
    return {**keep, "HOME": str(home), "IS_SANDBOX": "1",
            "ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": "claude-opus-9-1",
            "ANTHROPIC_DEFAULT_SONNET_MODEL": "claude-sonnet-9-1",
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": "claude-haiku-9-1",
            "CLAUDE_CODE_SUBAGENT_MODEL": "claude-sonnet-9-1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1"}


def test_claude_code_reads_and_writes_a_file(claude_bin: Path, toolshim: tuple[str, Path],
                                             model: tuple[FakeOllama, str],
                                             tmp_path: Path) -> None:
    base_url, log = toolshim
    workspace, home = tmp_path / "work", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    (workspace / "notes.txt").write_text("the quick brown fox\nsecond line\n")
    target = workspace / "out.txt"
    prompt = (f"Read the file {workspace / 'notes.txt'} and write its first line, "
              f"upper-cased, to {target}.")
    run = subprocess.run(
        [str(claude_bin), "-p", prompt, "--model", "claude-sonnet-9-1",
         "--permission-mode", "bypassPermissions"],
        check=False, cwd=workspace, env=_claude_env(base_url, home), capture_output=True,
        text=True,
        timeout=180)
    why = (f"claude exited {run.returncode}\nstdout: {run.stdout}\nstderr: {run.stderr}\n"
           f"toolshim log ({log}):\n{log.read_text()}")
    assert run.returncode == 0, why
    assert target.exists(), why
    assert target.read_text().strip() == "THE QUICK BROWN FOX", why
    assert "Done" in run.stdout, why
    sent = model[0].chat_requests()
    names = {t["function"]["name"] for r in sent for t in r.get("tools") or []}
    assert {"Read", "Write"} <= names, why
    assert {r["model"] for r in sent} == {MODEL}, why  # every Claude name was aliased
    if model[0].script is play_as_text:  # both calls came back as text, and were recovered
        assert log.read_text().count("calls_recovered=1") == 2, why


def _claude(claude_bin: Path, base_url: str, prompt: str, tmp_path: Path
            ) -> tuple[subprocess.CompletedProcess[str], Path]:
    workspace, home = tmp_path / "work", tmp_path / "home"
    workspace.mkdir(exist_ok=True)
    home.mkdir()
    run = subprocess.run(
        [str(claude_bin), "-p", prompt, "--model", "claude-sonnet-9-1",
         "--permission-mode", "bypassPermissions"],
        check=False, cwd=workspace, env=_claude_env(base_url, home), capture_output=True,
        text=True, timeout=180)
    return run, workspace


def _why(run: subprocess.CompletedProcess[str], log: Path) -> str:
    return (f"claude exited {run.returncode}\nstdout: {run.stdout}\nstderr: {run.stderr}\n"
            f"toolshim log ({log}):\n{log.read_text()[-8000:]}")


def test_claude_code_reads_a_file_on_a_backend_that_refuses_tools(
        claude_bin: Path, refusing: tuple[str, ScriptedAgentModel, Path],
        tmp_path: Path) -> None:
    base_url, backend, log = refusing
    (tmp_path / "work").mkdir()
    notes = tmp_path / "work" / "notes.txt"
    notes.write_text("walrus-7319-copper\n")
    run, _ = _claude(claude_bin, base_url, f"Read the file {notes} and tell me what it says.",
                     tmp_path)
    why = _why(run, log)
    assert run.returncode == 0, why
    assert "walrus-7319-copper" in run.stdout, why  # only the file holds this token
    assert any(r.get("tools") for r in backend.requests), why  # it was offered tools, refused
    assert "rung=emulate" in log.read_text(), why  # toolshim described the tools instead


def test_claude_code_writes_a_file_on_a_backend_that_refuses_tools(
        claude_bin: Path, refusing: tuple[str, ScriptedAgentModel, Path],
        tmp_path: Path) -> None:
    base_url, backend, log = refusing
    target = tmp_path / "work" / "created.txt"
    run, _ = _claude(claude_bin, base_url,
                     f"Create the file {target} containing exactly: heron-5521-violet", tmp_path)
    why = _why(run, log)
    assert run.returncode == 0, why
    assert target.exists() and target.read_text().strip() == "heron-5521-violet", why
    assert "Done" in run.stdout, why
    offered = {t["function"]["name"] for r in backend.requests for t in r.get("tools") or []}
    assert "Write" in offered, why  # its own write tool, refused natively, emulated
    assert "calls_recovered=1" in log.read_text(), why  # the Write call came back as text
