"""Stored responses for `previous_response_id`, GET and DELETE: bounded, expiring, in memory.

Each entry keeps the response object a client may fetch again and the chat
conversation (without instructions, as the API defines) that a continuation
starts from. Oldest entries make room past `size`; entries expire after `ttl`
seconds. Every worker process keeps its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from cachetools import TTLCache

from proxy.types import JSON, Message


@dataclass(frozen=True)
class Stored:
    response: JSON
    conversation: list[Message]


class ResponsesStore:
    def __init__(self, size: int, ttl: float) -> None:
        self._entries: TTLCache[str, Stored] | None = TTLCache(size, ttl) if size > 0 else None

    def put(self, response: JSON, conversation: list[Message]) -> None:
        if self._entries is not None:
            self._entries[response["id"]] = Stored(response, conversation)

    def get(self, response_id: str) -> Stored | None:
        return self._entries.get(response_id) if self._entries is not None else None

    def delete(self, response_id: str) -> bool:
        if self._entries is None:
            return False
        return self._entries.pop(response_id, None) is not None

    def __len__(self) -> int:
        return len(self._entries) if self._entries is not None else 0
