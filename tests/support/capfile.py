"""Edit capabilities.yaml under a running proxy and wait until it took effect.

The proxy reloads the file from a background thread every --reload-interval
seconds, never on a request, so a test that edits the file and sends a request
at once would race the reload; this waits for it, through /admin/capabilities.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx


def reload_state(proxy_url: str) -> tuple[int, str | None]:
    body = httpx.get(proxy_url + "/admin/capabilities").json()
    return body["generation"], body["last_reload_error"]


def edit_and_wait(path: Path, text: str, proxy_url: str, timeout: float = 10.0) -> None:
    """Write `text` (with a later mtime, so even a same-size edit is seen) and wait until
    the proxy has loaded it or reported it as an error."""
    before = reload_state(proxy_url)
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    deadline = time.monotonic() + timeout
    while reload_state(proxy_url) == before:
        assert time.monotonic() < deadline, "the edit was never reloaded"
        time.sleep(0.02)
