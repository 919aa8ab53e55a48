"""The console in a real headless Chromium, against a real toolshim process and the fake Ollama.

Debian's chromium (/usr/bin/chromium) driven by Playwright for Python; the
browsers Playwright would download are never used. Screenshots of every view
are saved under the test's tmp dir (and copied to /tmp/console-shots/).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from support.battery import good_answers, script
from support.capfile import edit_and_wait
from support.fake_ollama import FakeOllama, Reply, tool_call
from support.servers import free_port, wait_until_ok

CHROMIUM = "/usr/bin/chromium"
KEY = "sk-browser-test-5678"
FILE = """# my notes: keep this comment
version: 1
models:
  "qwen3:8b":   # exact entry, mine
    rename: {get_weather: weather_now}
  "gemma*":
    max_tools: 4

learned:
  "gemma3:4b":
    tools: "off"
    source: "runtime_error"
    at: "2026-11-20T10:00:00Z"
    evidence: "registry.ollama.ai/library/gemma3:4b does not support tools"
"""
SHOTS = Path("/tmp/console-shots")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason=f"{CHROMIUM} is missing (apt-get install -y chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


@pytest.fixture
def toolshim(fake_url: str, caps_path: Path, tmp_path: Path) -> Iterator[str]:
    """`python -m proxy` as its own process on a free loopback port."""
    caps_path.write_text(FILE)
    port = free_port()
    log = (tmp_path / "toolshim.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "proxy", "--host", "127.0.0.1", "--port", str(port),
         "--upstream", fake_url, "--capabilities", str(caps_path), "--api-key", KEY,
         "--reload-interval", "0", "--no-probe", "--shutdown-grace", "1"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()


def _wait_healthy(url: str, proc: subprocess.Popen[bytes]) -> None:
    assert wait_until_ok(url + "/healthz", proc, what="toolshim"), "toolshim exited"


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        context = browser.new_context(viewport={"width": 1440, "height": 900})
        tab = context.new_page()
        tab.set_default_timeout(15_000)
        outside: list[str] = []
        tab.on("request", lambda r: outside.append(r.url)
               if not r.url.startswith("http://127.0.0.1:") else None)
        try:
            yield tab
        finally:
            context.close()
            browser.close()
        assert outside == [], f"the page fetched from elsewhere: {outside}"


def _shot(page: Any, tmp_path: Path, name: str) -> None:
    target = tmp_path / f"{name}.png"
    page.screenshot(path=str(target), full_page=True)
    SHOTS.mkdir(exist_ok=True)
    shutil.copy(target, SHOTS / target.name)


def test_console_end_to_end(page: Any, toolshim: str, fake: FakeOllama, caps_path: Path,
                            tmp_path: Path) -> None:
    expect = sync_api.expect
    fake.add_model("llama3.2")
    fake.reply("qwen3:8b", Reply(tool_calls=[tool_call("weather_now", {"city": "Paris"})]))
    script(fake, "llama3.2", good_answers())

    # Login: nothing but the form until a key works.
    page.goto(toolshim + "/ui")
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#view-models")).to_be_hidden()
    _shot(page, tmp_path, "1-login")
    page.fill("#api-key", "sk-wrong")
    page.click("#login button")
    expect(page.locator("#login-error")).to_have_text("That key was not accepted.")
    page.fill("#api-key", KEY)
    page.click("#login button")

    # Models and where each field came from.
    gemma = page.locator('tr[data-model="gemma3:4b"]')
    # The learned refusal (an old `tools: off`, read as `tool_support: refused`) leaves
    # the mode to the fallback in force: emulate, the built-in default.
    expect(gemma.locator(".badge.mode-emulate")).to_have_text("emulate")
    expect(gemma.locator(".badge.src-built-in")).to_be_visible()
    # What a screen reader reads off the row: words, not "emulatebuilt-in".
    assert gemma.locator("td").nth(1).evaluate("td => td.textContent") == "emulate built-in"
    page.locator('tr[data-model="qwen3:8b"]').click()
    rename = page.locator(".fields .field", has_text="rename")
    expect(rename.locator(".badge.src-exact")).to_have_attribute("title", 'models: "qwen3:8b"')

    # Bench: the upstream body carries the rename, the client's does not.
    page.click('#nav a[data-view="bench"]')
    page.select_option("#bench-model", "qwen3:8b")
    page.click("#bench-run")
    expect(page.locator("#pane-upstream-sent")).to_contain_text('"weather_now"')
    expect(page.locator("#pane-rewritten .badge")).to_have_text("rewritten")
    # Two rewrites for this model: the rename, and the tool_choice OpenAI implies when
    # tools come without one (implicit_tool_choice: auto).
    expect(page.locator("#pane-upstream-sent .diff-add")).to_have_text(
        ['"name": "weather_now",', '"tool_choice": "auto"'])
    client_sent = page.locator("#pane-client-sent").inner_text()
    assert '"get_weather"' in client_sent and "weather_now" not in client_sent
    expect(page.locator("#pane-client-got")).to_contain_text('"get_weather"')
    expect(page.locator("#pane-upstream-raw")).to_contain_text("HTTP 200")
    _shot(page, tmp_path, "3-bench")

    # Requests: the bench's request is there; click shows its details.
    page.click('#nav a[data-view="requests"]')
    row = page.locator("#requests-table tbody tr", has_text="qwen3:8b").first
    row.click()
    expect(row.locator("td").nth(1)).to_have_text("chat")
    expect(page.locator("#request-detail")).to_contain_text("calls kept")
    _shot(page, tmp_path, "4-requests")

    # Validate a model from its row; the badge shows the score.
    page.click('#nav a[data-view="models"]')
    llama = page.locator('tr[data-model="llama3.2:latest"]')
    llama.get_by_role("button", name="Validate").click()
    expect(llama.locator(".validation .badge")).to_have_text("6/6", timeout=30_000)
    _shot(page, tmp_path, "2-models")

    # Promote the learned entry: the file changes, the person's comments stay.
    page.once("dialog", lambda dialog: dialog.accept())
    gemma.get_by_role("button", name="Promote").click()
    expect(page.locator("#flash")).to_contain_text("promoted")
    text = caps_path.read_text()
    assert "# my notes: keep this comment" in text and "# exact entry, mine" in text
    data = YAML(typ="safe").load(text)
    assert data["models"]["gemma3:4b"] == {"tools": "off"}
    assert "gemma3:4b" not in (data["learned"] or {})
    expect(page.locator('tr[data-model="gemma3:4b"] .badge.src-exact')).to_have_text("exact")

    # A bad edit: the reload error shows at the top, the last good version stays.
    # The proxy reloads the file in the background: the page is refreshed once it did.
    edit_and_wait(caps_path, text.replace("max_tools: 4", "max_tools: lots"), toolshim,
                  key=KEY)
    page.click("#models-refresh")
    expect(page.locator("#reload-error")).to_be_visible()
    expect(page.locator("#reload-error-text")).to_contain_text("max_tools")
    _shot(page, tmp_path, "5-reload-error")
