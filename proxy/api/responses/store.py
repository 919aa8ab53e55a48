"""Stored responses for `previous_response_id`, GET and DELETE: bounded, expiring, in memory.

Each entry keeps the response object a client may fetch again and the chat
conversation (without instructions, as the API defines) that a continuation
starts from. The store is bounded twice: in entries (`size`) and in bytes
(`max_bytes`, an entry weighed as the JSON it holds), because one conversation
can be megabytes and a thousand of them would be gigabytes. Oldest entries make
room past either bound; an entry larger than the whole byte budget is not kept
at all. Entries expire after `ttl` seconds. Every worker process keeps its own.
With API keys configured, an entry belongs to the key that made it (`owner`, a
digest of the key): another key can neither read, continue nor delete it, as if
it did not exist.
"""

from __future__ import annotations

import hmac
import time
from collections import OrderedDict
from dataclasses import dataclass

import orjson

from proxy.types import JSON, Message


@dataclass(frozen=True)
class Stored:
    response: JSON
    conversation: list[Message]
    owner: str = ""
    """who may use it (`Exchange.owner`): "" when the proxy has no API keys."""
    size: int = 0
    """bytes it weighs against the budget (`weigh`)."""
    expires: float = 0.0


def weigh(response: JSON, conversation: list[Message]) -> int:
    """An entry's size: its JSON, which is what it holds (strings dominate dicts' overhead)."""
    try:
        return len(orjson.dumps(response)) + len(orjson.dumps(conversation))
    except (TypeError, orjson.JSONEncodeError):
        return 1 << 62  # cannot be weighed: never kept


class ResponsesStore:
    """Insertion-ordered, so the oldest entry is always the first: expiry and both bounds
    pop from the front, each put or get costing O(evicted)."""

    def __init__(self, size: int, ttl: float, max_bytes: int = 256 * 1024 * 1024) -> None:
        self.size, self.ttl, self.max_bytes = size, ttl, max_bytes
        self._entries: OrderedDict[str, Stored] = OrderedDict()
        self.bytes = 0

    def put(self, response: JSON, conversation: list[Message], owner: str = "") -> bool:
        """Keep an entry; False when it is not kept (store off, or larger than the budget)."""
        weight = weigh(response, conversation) if self.size > 0 else 0
        if self.size <= 0 or weight > self.max_bytes:
            return False
        self._drop(response["id"])
        self._expire()
        while self._entries and (len(self._entries) >= self.size
                                 or self.bytes + weight > self.max_bytes):
            self._drop(next(iter(self._entries)))
        self._entries[response["id"]] = Stored(response, conversation, owner, weight,
                                               time.monotonic() + self.ttl)
        self.bytes += weight
        return True

    def get(self, response_id: str, owner: str = "") -> Stored | None:
        self._expire()
        stored = self._entries.get(response_id)
        return stored if stored is not None and hmac.compare_digest(stored.owner, owner) \
            else None

    def delete(self, response_id: str, owner: str = "") -> bool:
        if self.get(response_id, owner) is None:
            return False
        return self._drop(response_id)

    def _drop(self, response_id: str) -> bool:
        stored = self._entries.pop(response_id, None)
        if stored is not None:
            self.bytes -= stored.size
        return stored is not None

    def _expire(self) -> None:
        now = time.monotonic()
        while self._entries:
            oldest = next(iter(self._entries.values()))
            if oldest.expires > now:
                return
            self._drop(oldest.response["id"])

    def __len__(self) -> int:
        self._expire()
        return len(self._entries)
