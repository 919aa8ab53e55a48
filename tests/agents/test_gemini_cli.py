"""Gemini CLI itself, headless, through a real toolshim against a scripted model.

The `gemini` CLI from npm (`@google/gemini-cli`, pinned in scripts/agents.sh) runs
`gemini -p ... --approval-mode yolo` in a fresh HOME whose settings file selects
gemini-api-key auth and turns telemetry and updates off, pointed at toolshim (its own
process, uvicorn on loopback) by GOOGLE_GEMINI_BASE_URL; toolshim's upstream is the
scripted model (support/scripted_model.py behind the fake Ollama), and a backend that
refuses tools with Ollama's 400 (support/scripted_agents.py). The task makes it
read a file with its read_file tool and write another with its write_file tool; the
test checks the workspace, not only the answer text. Gemini CLI's helper calls ask for
Gemini model names; toolshim's `--alias gemini-*=...` maps them to the local model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import scripted_model as scripted
from support.agent_toolshim import AGENTS_DIR, KEY, MODEL, ROOT, toolshim_process
from support.fake_ollama import FakeOllama
from support.scripted_agents import ScriptedAgentModel
from support.servers import serve

pytestmark = pytest.mark.agents

SETTINGS = {"security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}}


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: the agents tier needs it to install the agents")
    subprocess.run([str(ROOT / "scripts" / "agents.sh")], check=True, timeout=600)
    found = AGENTS_DIR / "node_modules" / ".bin" / "gemini"
    assert found.exists(), f"scripts/agents.sh did not install gemini into {AGENTS_DIR}"
    return found


@pytest.fixture(params=["native", "text"])
def model(request: pytest.FixtureRequest) -> Iterator[tuple[FakeOllama, str]]:
    """The scripted model calling tools natively, or writing its calls as text."""
    fake = FakeOllama()
    fake.add_model(MODEL)
    fake.script = scripted.play if request.param == "native" else scripted.play_as_text
    with serve(fake.app, lifespan="off") as url:
        yield fake, url


@pytest.fixture
def toolshim(model: tuple[FakeOllama, str], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """toolshim as its own process; its log is kept in tmp_path (shown on failure)."""
    with toolshim_process(model[1], tmp_path, "gemini-*") as running:
        yield running


@pytest.fixture
def refusing(tmp_path: Path) -> Iterator[tuple[str, ScriptedAgentModel, Path]]:
    """A backend that refuses `tools` with Ollama's 400, and toolshim in front of it."""
    backend = ScriptedAgentModel("refusing", MODEL)
    with serve(backend.app, lifespan="off") as upstream, \
            toolshim_process(upstream, tmp_path, "gemini-*") as (base, log):
        yield base, backend, log


def _gemini_env(base_url: str, home: Path) -> dict[str, str]:
    """What a user sets to run Gemini CLI against toolshim, offline."""
    keep = {k: os.environ[k] for k in ("PATH", "LANG", "TERM") if k in os.environ}
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(SETTINGS))
    return {**keep, "HOME": str(home), "GOOGLE_GEMINI_BASE_URL": base_url,
            "GEMINI_API_KEY": KEY, "GEMINI_CLI_TRUST_WORKSPACE": "true"}


def test_gemini_cli_reads_and_writes_a_file(gemini_bin: Path, toolshim: tuple[str, Path],
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
        [str(gemini_bin), "-p", prompt, "-m", "gemini-2.5-pro", "--approval-mode", "yolo"],
        check=False, cwd=workspace, env=_gemini_env(base_url, home), capture_output=True,
        text=True, timeout=180)
    why = (f"gemini exited {run.returncode}\nstdout: {run.stdout}\nstderr: {run.stderr}\n"
           f"toolshim log ({log}):\n{log.read_text()}")
    assert run.returncode == 0, why
    assert target.exists(), why
    assert target.read_text().strip() == "THE QUICK BROWN FOX", why
    assert "Done" in run.stdout, why
    sent = model[0].chat_requests()
    names = {t["function"]["name"] for r in sent for t in r.get("tools") or []}
    assert {"read_file", "write_file"} <= names, why
    assert {r["model"] for r in sent} == {MODEL}, why  # every Gemini name was aliased
    assert "endpoint=gemini" in log.read_text(), why
    if model[0].script is scripted.play_as_text:  # both calls came back as text, recovered
        assert log.read_text().count("calls_recovered=1") == 2, why


def _gemini(gemini_bin: Path, base_url: str, prompt: str, tmp_path: Path
            ) -> subprocess.CompletedProcess[str]:
    workspace, home = tmp_path / "work", tmp_path / "home"
    workspace.mkdir(exist_ok=True)
    home.mkdir()
    return subprocess.run(
        [str(gemini_bin), "-p", prompt, "-m", "gemini-2.5-pro", "--approval-mode", "yolo"],
        check=False, cwd=workspace, env=_gemini_env(base_url, home), capture_output=True,
        text=True, timeout=180)


def _why(run: subprocess.CompletedProcess[str], log: Path) -> str:
    return (f"gemini exited {run.returncode}\nstdout: {run.stdout}\nstderr: {run.stderr}\n"
            f"toolshim log ({log}):\n{log.read_text()[-8000:]}")


def test_gemini_cli_reads_a_file_on_a_backend_that_refuses_tools(
        gemini_bin: Path, refusing: tuple[str, ScriptedAgentModel, Path],
        tmp_path: Path) -> None:
    base_url, backend, log = refusing
    (tmp_path / "work").mkdir()
    notes = tmp_path / "work" / "notes.txt"
    notes.write_text("walrus-7319-copper\n")
    run = _gemini(gemini_bin, base_url, f"Read the file {notes} and tell me what it says.",
                  tmp_path)
    why = _why(run, log)
    assert run.returncode == 0, why
    assert "walrus-7319-copper" in run.stdout, why  # only the file holds this token
    assert any(r.get("tools") for r in backend.requests), why  # it was offered tools, refused
    assert "rung=emulate" in log.read_text(), why  # toolshim described the tools instead


def test_gemini_cli_writes_a_file_on_a_backend_that_refuses_tools(
        gemini_bin: Path, refusing: tuple[str, ScriptedAgentModel, Path],
        tmp_path: Path) -> None:
    base_url, backend, log = refusing
    target = tmp_path / "work" / "created.txt"
    run = _gemini(gemini_bin, base_url,
                  f"Create the file {target} containing exactly: heron-5521-violet", tmp_path)
    why = _why(run, log)
    assert run.returncode == 0, why
    assert target.exists() and target.read_text().strip() == "heron-5521-violet", why
    assert "Done" in run.stdout, why
    assert "endpoint=gemini" in log.read_text(), why
    offered = {t["function"]["name"] for r in backend.requests for t in r.get("tools") or []}
    assert "write_file" in offered, why  # its own write tool, refused natively, emulated
    assert "calls_recovered=1" in log.read_text(), why  # write_file came back as text
