"""Which path a passed-through request may reach on the upstream: only `/v1/...`.

The path the client sent is normalised the way a backend (or httpx) would
read it: percent-decoding, backslashes as slashes, repeated slashes, dot
segments. Only what is still under `/v1/` afterwards is forwarded, so
`/v1/../api/delete` or `/v1/%2e%2e/api/pull` can never reach a backend's
admin API. Something still percent-encoded after one decoding (a dot, a
slash, a backslash, a percent) is refused outright: the backend would decode
it once more. Pure; no I/O.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

_STILL_ENCODED = re.compile(r"%(2e|2f|5c|25)", re.IGNORECASE)
# What may stay literal in a forwarded path (RFC 3986 pchar and "/").
_SAFE = "/:@!$&'()*+,;=-._~"


def passthrough_path(raw_path: bytes) -> str | None:
    """The encoded path to forward for `raw_path` (no query), or None: not under /v1/."""
    try:
        decoded = unquote(raw_path.decode("ascii"), errors="strict")
    except UnicodeDecodeError:
        return None
    if _STILL_ENCODED.search(decoded) or "\x00" in decoded:
        return None
    path = _remove_dot_segments(decoded.replace("\\", "/"))
    if not path.startswith("/v1/") or path == "/v1/":
        return None
    return quote(path, safe=_SAFE)


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, with empty segments (`//`) dropped as well."""
    kept: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if kept:
                kept.pop()
            continue
        kept.append(segment)
    trailing = "/" if path.endswith(("/", "/.", "/..")) and kept else ""
    return "/" + "/".join(kept) + trailing
