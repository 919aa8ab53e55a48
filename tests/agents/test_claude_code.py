"""Claude Code itself, headless, through a real toolshim against a scripted model.

The `claude` CLI from npm (pinned in scripts/agents.sh) runs `claude -p ...` with
bypassed permissions in a fresh HOME, offline, pointed at toolshim (its own
process, uvicorn on loopback) whose upstream is the scripted model
(support/scripted_model.py behind the fake Ollama). The task makes it read a file
with its Read tool and write another with its Write tool; the test checks the
workspace, not only the answer text. Claude Code asks for its own model names;
toolshim's `--alias` maps them to the local model.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_ollama import FakeOllama
from support.scripted_model import play, play_as_text
from support.servers import free_port, serve, wait_until_ok

pytestmark = pytest.mark.agents

ROOT = Path(__file__).resolve().parents[2]
AGENTS_DIR = Path(os.environ.get("TOOLSHIM_AGENTS_DIR", ROOT / ".agents"))
MODEL = "qwen3-coder:30b"
KEY = "sk-toolshim-agents"


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
    caps = tmp_path / "capabilities.yaml"
    caps.write_text("version: 1\n")
    log = tmp_path / "toolshim.log"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--host", "127.0.0.1", "--port", str(port),
             "--upstream", model[1], "--capabilities", str(caps), "--api-key", KEY,
             "--alias", f"claude-*={MODEL}", "--log-format", "text"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
        try:
            assert wait_until_ok(f"http://127.0.0.1:{port}/healthz", proc), log.read_text()
            yield f"http://127.0.0.1:{port}", log
        finally:
            proc.terminate()
            proc.wait(timeout=10)


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
