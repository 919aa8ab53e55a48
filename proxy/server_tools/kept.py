"""Server calls set aside from mixed turns, kept per client until that client sends the turn back.

Owns: the bounded store behind the loop's `put_back`. A part is filed under
its owner (a digest of the API key that made the turn) and each of the turn's
client call ids; `take` hands a client only its own parts, and removes each
part it hands out (with all its ids): what is set aside is used once. Bounded
in entries, in bytes and in time (a TTL), the oldest parts dropped first.
Must not: give one key's part to another key, whatever call id it names, or
keep the key itself (only its digest).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import orjson

from proxy.server_tools.loop import SetAside

TTL_S = 3600.0
"""seconds a part waits for its client to send the turn back."""
MAX_PARTS = 4096
MAX_BYTES = 32 << 20
"""the calls and results kept, as JSON, over all clients."""


@dataclass
class _Entry:
    owner: str
    ids: tuple[str, ...]
    part: SetAside
    size: int
    expires: float


class KeptCalls:
    def __init__(self, *, ttl: float = TTL_S, max_parts: int = MAX_PARTS,
                 max_bytes: int = MAX_BYTES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.max_parts, self.max_bytes, self.clock = ttl, max_parts, max_bytes, clock
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._index: dict[tuple[str, str], int] = {}
        self._next = 0
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def keep(self, owner: str, call_ids: Iterable[str], part: SetAside) -> bool:
        """File `part` under owner and each client call id; False if it alone is too big."""
        ids = tuple(dict.fromkeys(i for i in call_ids if i))
        size = len(orjson.dumps([part.calls, part.results])) + sum(map(len, ids))
        if not ids or size > self.max_bytes:
            return False
        self._expire()
        for call_id in ids:  # a client id reused by the same key: the newer part wins
            old = self._index.get((owner, call_id))
            if old is not None:
                self._drop(old)
        self._next += 1
        self._entries[self._next] = _Entry(owner, ids, part, size, self.clock() + self.ttl)
        for call_id in ids:
            self._index[(owner, call_id)] = self._next
        self.bytes += size
        while len(self._entries) > self.max_parts or self.bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))
        return True

    def take(self, owner: str, call_ids: Iterable[str]) -> dict[str, SetAside]:
        """The owner's parts for these ids (id -> part), removed from the store."""
        self._expire()
        found: dict[str, SetAside] = {}
        for call_id in call_ids:
            key = self._index.get((owner, call_id))
            if key is None:
                continue
            entry = self._drop(key)
            found.update((i, entry.part) for i in entry.ids)
        return found

    def _expire(self) -> None:
        now = self.clock()
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if entry.expires > now:
                return  # filed in time order with one TTL: the rest are younger
            self._drop(key)

    def _drop(self, key: int) -> _Entry:
        entry = self._entries.pop(key)
        for call_id in entry.ids:
            self._index.pop((entry.owner, call_id), None)
        self.bytes -= entry.size
        return entry


def history_call_ids(messages: Iterable[Mapping[str, object]]) -> list[str]:
    """The call ids of every assistant turn in a history, in order."""
    ids: list[str] = []
    for message in messages:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if isinstance(calls, list):
            ids.extend(str(c.get("id", "")) for c in calls if isinstance(c, dict))
    return ids
