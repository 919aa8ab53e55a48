"""The key a client sent toolshim, in whichever of the doors' forms it came.

OpenAI's clients send `Authorization: Bearer <key>`, Anthropic's `x-api-key`,
Google's `x-goog-api-key` or `?key=` (the Gemini door). What toolshim keeps
per client (stored responses, set-aside server-tool results) is keyed by
`owner_digest`, and what a client sent is masked in everything shown
(observability/redact.py) by `client_keys`: both read the forms here, so a
new door's form is added once. Must not: decide whether a key is allowed (the
edge does, in constant time), or keep a key anywhere.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from urllib.parse import parse_qs

KEY_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")
"""request headers whose value is the client's key (Authorization without its scheme)."""


def client_keys(headers: Mapping[str, str], query: str = "") -> list[str]:
    """Every key the client sent, in the order of `KEY_HEADERS`, then `?key=`."""
    found = []
    for name in KEY_HEADERS:
        value = (headers.get(name) or "").strip()
        if not value:
            continue
        if name == "authorization":
            _, _, credentials = value.partition(" ")
            value = credentials.strip() or value
        found.append(value)
    if "key=" in query:
        found += [v.strip() for v in parse_qs(query).get("key", []) if v.strip()]
    return found


def owner_digest(headers: Mapping[str, str], query: str = "") -> str:
    """Who a request is, for what toolshim keeps per client: a digest of the first key
    it sent ("" with none; the key itself is never kept)."""
    keys = client_keys(headers, query)
    if not keys:
        return ""
    return hashlib.sha256(keys[0].encode("utf-8", "surrogateescape")).hexdigest()
