"""Per-upstream concurrency bound with a bounded, first-come-first-served wait queue.

A sidecar in front of a GPU server normally carries hundreds of concurrent
streams, so the defaults are high; the bound exists to stop abuse. Past the
queue, or after waiting too long, the client gets 429 with Retry-After.
A freed slot is handed straight to the oldest waiter, so a newcomer never
overtakes the queue and a waiter that timed out never swallows a wake-up.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field

from proxy.errors import ApiError


@dataclass
class _Gate:
    active: int = 0
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)


class Limiter:
    def __init__(self, max_active: int, max_waiting: int, wait_timeout: float) -> None:
        self.max_active = max_active
        self.max_waiting = max_waiting
        self.wait_timeout = wait_timeout
        self._gates: dict[str, _Gate] = {}

    def active(self, key: str) -> int:
        gate = self._gates.get(key)
        return gate.active if gate else 0

    def waiting(self, key: str) -> int:
        gate = self._gates.get(key)
        return len(gate.waiters) if gate else 0

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """key -> (active, waiting), for the metrics scrape."""
        return {key: (gate.active, len(gate.waiters)) for key, gate in self._gates.items()}

    async def acquire(self, key: str) -> None:
        """Take a slot, waiting in line if needed; ApiError 429 when the line is full or slow."""
        gate = self._gates.setdefault(key, _Gate())
        if gate.active < self.max_active and not gate.waiters:
            gate.active += 1
            return
        if len(gate.waiters) >= self.max_waiting:
            raise self._busy()
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        gate.waiters.append(turn)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.wait_timeout)
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                # The slot was handed over just as we gave up: pass it on.
                self._release(gate)
            else:
                turn.cancel()
                gate.waiters.remove(turn)
            if isinstance(exc, TimeoutError):
                raise self._busy() from None
            raise

    async def release(self, key: str) -> None:
        self._release(self._gates[key])

    def release_now(self, key: str) -> bool:
        """`release` without a wait, where none is needed (this process's gates);
        False when the release must be awaited (a fleet's shared limiter)."""
        self._release(self._gates[key])
        return True

    def _release(self, gate: _Gate) -> None:
        while gate.waiters:
            turn = gate.waiters.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot changes hands; `active` stays the same
                return
        gate.active -= 1

    def _busy(self) -> ApiError:
        return ApiError(429, "too many concurrent requests to this upstream; retry shortly",
                        type_="rate_limit_error", code="upstream_busy",
                        headers={"retry-after": "1"})
