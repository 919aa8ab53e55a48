"""Gemini CLI itself, headless, through a real toolshim against a scripted model.

The `gemini` CLI from npm (`@google/gemini-cli`, pinned in scripts/agents.sh) runs
`gemini -p ... --approval-mode yolo` in a fresh HOME whose settings file selects
gemini-api-key auth and turns telemetry and updates off, pointed at toolshim (its own
process, uvicorn on loopback) by GOOGLE_GEMINI_BASE_URL; toolshim's upstream is the
scripted model (support/scripted_model.py behind the fake Ollama). The task makes it
read a file with its read_file tool and write another with its write_file tool; the
test checks the workspace, not only the answer text. Gemini CLI's helper calls ask for
Gemini model names; toolshim's `--alias gemini-*=...` maps them to the local model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import scripted_model as scripted
from support.fake_ollama import FakeOllama
from support.servers import free_port, serve, wait_until_ok

pytestmark = pytest.mark.agents

ROOT = Path(__file__).resolve().parents[2]
AGENTS_DIR = Path(os.environ.get("TOOLSHIM_AGENTS_DIR", ROOT / ".agents"))
MODEL = "qwen3-coder:30b"
KEY = "sk-toolshim-agents"
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
    caps = tmp_path / "capabilities.yaml"
    caps.write_text("version: 1\n")
    log = tmp_path / "toolshim.log"
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "--host", "127.0.0.1", "--port", str(port),
             "--upstream", model[1], "--capabilities", str(caps), "--api-key", KEY,
             "--alias", f"gemini-*={MODEL}", "--log-format", "text"],
            stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
        try:
            assert wait_until_ok(f"http://127.0.0.1:{port}/healthz", proc), log.read_text()
            yield f"http://127.0.0.1:{port}", log
        finally:
            proc.terminate()
            proc.wait(timeout=10)


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
