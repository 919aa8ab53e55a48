"""Stored responses for `previous_response_id`, GET and DELETE: bounded, expiring, in memory.

Each entry keeps the response object a client may fetch again and the chat
conversation (without instructions, as the API defines) that a continuation
starts from. Oldest entries make room past `size`; entries expire after `ttl`
seconds. Every worker process keeps its own. With API keys configured, an entry
belongs to the key that made it (`owner`, a digest of the key): another key can
neither read, continue nor delete it, as if it did not exist.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from cachetools import TTLCache

from proxy.types import JSON, Message


@dataclass(frozen=True)
class Stored:
    response: JSON
    conversation: list[Message]
    owner: str = ""
    """who may use it (`owner_of`): "" when the proxy has no API keys."""


def owner_of(authorization: str, keys_configured: bool) -> str:
    """Whose a stored response is: with API keys configured, the bearer token the
    request came with, as a digest (the key itself is never kept); else everyone's."""
    if not keys_configured:
        return ""
    token = authorization.partition(" ")[2].strip()
    return hashlib.sha256(token.encode()).hexdigest()


class ResponsesStore:
    def __init__(self, size: int, ttl: float) -> None:
        self._entries: TTLCache[str, Stored] | None = TTLCache(size, ttl) if size > 0 else None

    def put(self, response: JSON, conversation: list[Message], owner: str = "") -> None:
        if self._entries is not None:
            self._entries[response["id"]] = Stored(response, conversation, owner)

    def get(self, response_id: str, owner: str = "") -> Stored | None:
        stored = self._entries.get(response_id) if self._entries is not None else None
        return stored if stored is not None and hmac.compare_digest(stored.owner, owner) \
            else None

    def delete(self, response_id: str, owner: str = "") -> bool:
        if self.get(response_id, owner) is None:
            return False
        assert self._entries is not None
        return self._entries.pop(response_id, None) is not None

    def __len__(self) -> int:
        return len(self._entries) if self._entries is not None else 0
