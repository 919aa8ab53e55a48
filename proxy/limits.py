"""Per-upstream concurrency bound with a bounded wait queue.

A sidecar in front of a GPU server normally carries hundreds of concurrent
streams, so the defaults are high; the bound exists to stop abuse. Past the
queue, or after waiting too long, the client gets 429 with Retry-After.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from proxy.errors import ApiError


@dataclass
class _Gate:
    active: int = 0
    waiting: int = 0
    freed: asyncio.Condition = field(default_factory=asyncio.Condition)


class Limiter:
    def __init__(self, max_active: int, max_waiting: int, wait_timeout: float) -> None:
        self.max_active = max_active
        self.max_waiting = max_waiting
        self.wait_timeout = wait_timeout
        self._gates: dict[str, _Gate] = {}

    def active(self, key: str) -> int:
        gate = self._gates.get(key)
        return gate.active if gate else 0

    async def acquire(self, key: str) -> None:
        gate = self._gates.setdefault(key, _Gate())
        if gate.active < self.max_active:
            gate.active += 1
            return
        if gate.waiting >= self.max_waiting:
            raise self._busy()
        gate.waiting += 1
        try:
            async with gate.freed:
                await asyncio.wait_for(
                    gate.freed.wait_for(lambda: gate.active < self.max_active),
                    self.wait_timeout)
                gate.active += 1
        except TimeoutError:
            raise self._busy() from None
        finally:
            gate.waiting -= 1

    async def release(self, key: str) -> None:
        gate = self._gates[key]
        gate.active -= 1
        if gate.waiting:
            async with gate.freed:
                gate.freed.notify()

    def _busy(self) -> ApiError:
        return ApiError(429, "too many concurrent requests to this upstream; retry shortly",
                        type_="rate_limit_error", code="upstream_busy",
                        headers={"retry-after": "1"})
