"""Edit capabilities.yaml under a running proxy and wait until it took effect.

The proxy reloads the file from a background thread every --reload-interval
seconds, never on a request, so a test that edits the file and sends a request
at once would race the reload; this waits for it, through /admin/capabilities.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx


def reload_state(proxy_url: str, key: str | None = None) -> tuple[int, str | None]:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    body = httpx.get(proxy_url + "/admin/capabilities", headers=headers).json()
    return body["generation"], body["last_reload_error"]


def replace_text(path: Path, text: str) -> None:
    """Write the file the way editors and config tools do, in one rename: the background
    reload may run at any moment and must never see a half-written file."""
    new = path.with_name(path.name + ".new")
    new.write_text(text)
    new.replace(path)


def edit_and_wait(path: Path, text: str, proxy_url: str, timeout: float = 10.0,
                  key: str | None = None) -> None:
    """Replace the file with `text` (a new inode, so even a same-size edit within the
    same clock tick is seen) and wait until the proxy has loaded it or reported it.
    `key`: the proxy's API key, when it has one."""
    before = reload_state(proxy_url, key)
    replace_text(path, text)
    deadline = time.monotonic() + timeout
    while reload_state(proxy_url, key) == before:
        assert time.monotonic() < deadline, "the edit was never reloaded"
        time.sleep(0.02)
