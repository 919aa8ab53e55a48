"""capabilities.yaml in tests: edit it under a running proxy and wait until it took
effect; read back what the proxy learned.

The proxy reloads the file from a background thread every --reload-interval
seconds, never on a request, so a test that edits the file and sends a request
at once would race the reload; this waits for it, through /admin/capabilities.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from ruamel.yaml import YAML

from support.polling import until

# A file holding one learned refusal, as the proxy writes it: what the console and the
# admin API show and what a browser-side attacker would try to change.
ONE_LEARNED = """version: 1
learned:
  "gemma3:4b":
    tools: "off"
    source: "runtime_error"
    at: "2026-11-20T10:00:00Z"
    evidence: "does not support tools"
"""


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
    until(lambda: reload_state(proxy_url, key) != before, within=timeout,
          what=f"the proxy to reload {path.name}")


def learned(path: Path | str) -> dict[str, Any]:
    """The file's `learned:` section as plain data (model -> entry); {} while the proxy has
    written none, or the file is empty."""
    data = YAML(typ="safe").load(Path(path).read_text()) or {}
    return dict(data.get("learned") or {})


def learned_entry(path: Path | str, model: str, *, holding: str | None = None,
                  within: float = 5.0) -> dict[str, Any]:
    """`model`'s learned entry once the proxy has written it (with `holding`: once the entry
    holds that key). Facts are written by a background keeper after the response ended, so
    reading the file right after an answer races it."""
    def written() -> bool:
        entry = learned(path).get(model)
        return entry is not None and (holding is None or holding in entry)
    until(written, within=within, what=f"learned: {model}" + (f".{holding}" if holding else ""))
    return dict(learned(path)[model])
