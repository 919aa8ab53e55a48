"""--shared-limits: --max-concurrency and the queue held fleet-wide in Redis.

A permit is a member of a sorted set per upstream scored by its expiry (Redis
server time, so replicas' clocks do not matter). Holders refresh their permits
every few seconds; a replica that dies holding some stops refreshing, and its
permits expire after PERMIT_TTL. Taking a permit is one Lua script (expire
stale ones, count, add), so the bound is exact across replicas.

The queue keeps the per-process limiter's semantics: first come first served, at
most --max-queue waiting, --queue-timeout, then 429. Only the head of a
process's line asks Redis, woken by a local release or every POLL seconds.
While Redis is away the per-process limiter (the parent class) takes over.
Must not: hold a request up on Redis's account: an unreachable Redis means the
local bound, not an error.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque

from proxy.settings import redact_url
from proxy.state.limits import Limiter
from proxy.state.redis_state import FAILURES, OP_TIMEOUT, RedisState

PERMIT_TTL_MS = 15_000
REFRESH_EVERY = 5.0
POLL = 0.02

_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

_REFRESH = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
"""


class _Unavailable(Exception):
    pass


class SharedLimiter(Limiter):
    """A Limiter whose bound is fleet-wide while Redis answers."""

    def __init__(self, state: RedisState, max_active: int, max_waiting: int,
                 wait_timeout: float) -> None:
        super().__init__(max_active, max_waiting, wait_timeout)
        self._state = state
        self._take = state.client.register_script(_TAKE)
        self._refresh = state.client.register_script(_REFRESH)
        self._held: dict[str, list[str]] = {}
        self._fallback: dict[str, int] = {}
        self._lines: dict[str, deque[object]] = {}
        self._wake: dict[str, asyncio.Event] = {}
        self._refresher: asyncio.Task[None] | None = None

    def snapshot(self) -> dict[str, tuple[int, int]]:
        local = super().snapshot()
        keys = set(local) | set(self._held) | set(self._lines)
        return {k: (len(self._held.get(k, ())) + local.get(k, (0, 0))[0],
                    len(self._lines.get(k, ())) + local.get(k, (0, 0))[1]) for k in keys}

    async def acquire(self, key: str) -> None:
        line = self._lines.setdefault(key, deque())
        try:
            if not line and await self._try(key):
                return
            if len(line) >= self.max_waiting:
                raise self._busy()
            await self._wait_in_line(key, line)
        except _Unavailable:
            await super().acquire(key)  # per-process bound while Redis is away
            self._fallback[key] = self._fallback.get(key, 0) + 1

    def release_now(self, key: str) -> bool:
        return False  # the permit is the fleet's: given back over the network

    async def release(self, key: str) -> None:
        if self._fallback.get(key):
            self._fallback[key] -= 1
            await super().release(key)
            return
        token = self._held[key].pop()
        self._wake_line(key)
        if self._state.ok():
            try:
                await asyncio.wait_for(self._state.client.zrem(self._permits(key), token),
                                       OP_TIMEOUT)
            except FAILURES as exc:  # the permit expires on its own
                self._state.degrade(exc)

    async def close(self) -> None:
        if self._refresher is not None:
            self._refresher.cancel()
            await asyncio.gather(self._refresher, return_exceptions=True)

    async def _wait_in_line(self, key: str, line: deque[object]) -> None:
        me = object()
        line.append(me)
        wake = self._wake.setdefault(key, asyncio.Event())
        try:
            async with asyncio.timeout(self.wait_timeout):
                while True:
                    if line[0] is me and await self._try(key):
                        return
                    wake.clear()
                    try:
                        await asyncio.wait_for(wake.wait(), POLL)
                    except TimeoutError:
                        pass
        except TimeoutError:
            raise self._busy() from None
        finally:
            line.remove(me)
            self._wake_line(key)

    async def _try(self, key: str) -> bool:
        if not self._state.ok():
            raise _Unavailable
        token = secrets.token_hex(8)
        try:
            granted = await asyncio.wait_for(
                self._take(keys=[self._permits(key)],
                           args=[self.max_active, PERMIT_TTL_MS, token]), OP_TIMEOUT)
        except FAILURES as exc:
            self._state.degrade(exc)
            raise _Unavailable from None
        if not granted:
            return False
        self._held.setdefault(key, []).append(token)
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.get_running_loop().create_task(self._keep_alive())
        return True

    async def _keep_alive(self) -> None:
        """Refresh this replica's permits so they outlive PERMIT_TTL only while it lives."""
        while True:
            await asyncio.sleep(REFRESH_EVERY)
            for key, tokens in list(self._held.items()):
                if tokens and self._state.ok():
                    try:
                        await asyncio.wait_for(self._refresh(
                            keys=[self._permits(key)], args=[PERMIT_TTL_MS, *tokens]), OP_TIMEOUT)
                    except FAILURES as exc:
                        self._state.degrade(exc)

    def _wake_line(self, key: str) -> None:
        wake = self._wake.get(key)
        if wake is not None:
            wake.set()

    def _permits(self, key: str) -> str:
        return f"{self._state.prefix}permits:{redact_url(key)}"
