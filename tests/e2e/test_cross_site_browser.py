"""A real headless Chromium on a hostile page: it cannot act through toolshim, and a
rebound DNS name gets nothing (docs/security.md).

Chromium's `--host-resolver-rules` plays the attacker's DNS: `evil.test` and
`rebind.test` both resolve to 127.0.0.1, so the page at http://evil.test:PORT is
another site, and a page at http://rebind.test:TOOLSHIM_PORT is what a DNS-rebinding
attack makes of toolshim's own address.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route
from support.capfile import ONE_LEARNED
from support.fake_ollama import FakeOllama
from support.servers import serve

from proxy.app import create_app
from proxy.settings import Settings

CHROMIUM = "/usr/bin/chromium"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK),
                       reason=f"{CHROMIUM} is missing (apt-get install -y chromium)"),
]
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

ATTACK = """<!doctype html><body>
<form id="chat" method="POST" enctype="text/plain" action="{target}/v1/chat/completions">
<input name='{{"model": "qwen3:8b", "messages": [{{"role": "user", "content": "hi"}}], "x": "'
 value='"}}'></form>
<script>
async function attack() {{
  const results = [];
  for (const path of ["/admin/learned/gemma3:4b/forget", "/admin/validate",
                      "/admin/bench", "/v1/chat/completions"]) {{
    try {{
      await fetch("{target}" + path, {{method: "POST", mode: "no-cors",
        headers: {{"content-type": "text/plain"}},
        body: '{{"model": "qwen3:8b", "prompt": "hi", "messages": [{{"role": "user", "content": "hi"}}]}}'}});
      results.push("sent");
    }} catch (e) {{ results.push("error"); }}
  }}
  return results;
}}
</script></body>"""


@pytest.fixture
def toolshim(make_settings: Callable[..., Settings], caps_path: Path) -> Iterator[str]:
    caps_path.write_text(ONE_LEARNED)
    with serve(create_app(make_settings(probe=False))) as url:
        yield url


@pytest.fixture
def evil(toolshim: str) -> Iterator[str]:
    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse(ATTACK.format(target=toolshim.replace("127.0.0.1", "localhost")))

    with serve(Starlette(routes=[Route("/", page)]), lifespan="off") as url:
        yield url.replace("127.0.0.1", "evil.test")


@pytest.fixture
def browser_page() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--host-resolver-rules=MAP evil.test 127.0.0.1, MAP rebind.test 127.0.0.1"])
        context = browser.new_context()
        tab = context.new_page()
        tab.set_default_timeout(15_000)
        try:
            yield tab
        finally:
            context.close()
            browser.close()


def test_a_hostile_page_cannot_forget_validate_bench_or_chat(
        browser_page: Any, evil: str, fake: FakeOllama, caps_path: Path) -> None:
    before = len(fake.requests)
    browser_page.goto(evil + "/")
    assert browser_page.evaluate("attack()") == ["sent"] * 4  # the browser sent them all
    with browser_page.expect_navigation():
        browser_page.evaluate("document.getElementById('chat').submit()")
    # The form's answer is toolshim's 403, shown to the user instead of a model's reply.
    assert "cross_origin" in browser_page.content()
    time.sleep(0.3)  # nothing is in flight that could still land
    assert len(fake.requests) == before
    assert '"gemma3:4b"' in caps_path.read_text()


def test_a_rebound_name_reads_nothing(browser_page: Any, toolshim: str) -> None:
    rebound = toolshim.replace("127.0.0.1", "rebind.test")
    answer = browser_page.goto(rebound + "/admin/capabilities")
    assert answer.status == 421
    assert "gemma3:4b" not in browser_page.content()
    # The console at its own address keeps working.
    assert browser_page.goto(toolshim + "/admin/capabilities").status == 200
    assert "gemma3:4b" in browser_page.content()
