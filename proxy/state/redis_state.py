"""Learned facts and probe turns shared through Redis, never at a request's expense.

Layout (every key under the prefix): `facts:<model>` is a hash, one field per
set of behaviour fields, each value a codec.py JSON fact, the key expiring
FACTS_TTL after its last write; `facts` is the channel new facts are published
on; `probe:<model>` a short lock and `probed:<model>` a marker, so one replica
of the fleet probes a model.

One background task follows the fleet: subscribe, load every fact, push what
this replica learned while Redis was away, then apply published facts as they
come. Any Redis failure flips the state to degraded (logged once), the
replica goes on with what it knows, and the task reconnects and resyncs.
Facts go into the local store through its `record`, so each replica writes
them into its own capabilities.yaml with the same locked writer. Only facts
(codec.refusal) cross Redis, either way: configuration read from Redis is
refused with one log line and never applied, written or republished.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import secrets
import socket
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from proxy.capabilities.learning import LearnedFact, fact_is_news
from proxy.capabilities.resolve import normalise_model_name
from proxy.state.base import StateStatus
from proxy.state.codec import (
    Malformed,
    Refused,
    SharedFact,
    decode,
    encode,
    field_key,
    refusal,
)

OP_TIMEOUT = 0.5
"""seconds any one Redis operation may take before the replica stops waiting for it."""
RECONNECT_EVERY = 1.0
PING_EVERY = 2.0
STARTUP_WAIT = 3.0
"""seconds startup waits for the first load; past it the replica starts degraded."""
PROBE_LOCK_TTL = 30.0
PROBED_TTL = 3600
"""seconds a probe answer stands for the fleet (like each process's own memory of it)."""
FACTS_TTL = 30 * 24 * 3600
"""seconds a `facts:<model>` key lives after its last write. A TTL, not a count: Redis
enforces it by itself with every replica down, where a count needs an index and a
sweeper. Made-up model names (a backend that answers any name gets probed for each)
then cost Redis memory for a month at most. An expired fact is not lost: replicas
keep it in their capabilities.yaml and republish what Redis lacks when they resync,
and one that meets the model again learns it again for one retried request."""
MAX_KNOWN = 20_000
"""facts this replica remembers to republish at a resync, oldest forgotten first."""

FAILURES: tuple[type[BaseException], ...] = (RedisError, OSError, TimeoutError)


class FactSink(Protocol):
    """Where received facts go: the capability store's public entry point."""

    def record(self, facts: Sequence[LearnedFact]) -> None: ...


def connect(url: str) -> Redis:
    """A client that fails fast: short timeouts, no retries (the caller degrades instead)."""
    client: Redis = Redis.from_url(
        url, socket_timeout=OP_TIMEOUT, socket_connect_timeout=OP_TIMEOUT,
        retry=Retry(NoBackoff(), 0), health_check_interval=0)
    return client


class RedisState:
    """SharedState through Redis; see the module docstring for the layout."""

    def __init__(self, client: Redis, prefix: str, sink: FactSink, *,
                 probe_wait: float, log: logging.Logger | None = None) -> None:
        self.client = client
        self.prefix = prefix
        # host:pid names the replica in provenance; the suffix tells apart two apps
        # in one process (tests, embedding) so neither takes the other's facts for its own.
        self.replica = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(2)}"
        self._sink = sink
        self._probe_wait = probe_wait
        self._log = log or logging.getLogger("toolshim")
        self._status: StateStatus = "degraded"
        self._known: OrderedDict[tuple[str, str], SharedFact] = OrderedDict()
        """Every fact this replica learned or received, as it would be stored."""
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._bad_seen: set[str] = set()
        self.malformed = 0
        self.refused = 0
        self.resyncs = 0
        self.closers: list[Callable[[], Awaitable[None]]] = []

    # --- SharedState ----------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._follow())
        try:
            await asyncio.wait_for(self._synced.wait(), STARTUP_WAIT)
        except TimeoutError:
            self.degrade(TimeoutError("first load took too long"))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for close in self.closers:
            await close()
        await self.client.aclose()

    def status(self) -> StateStatus:
        return self._status

    async def share(self, facts: Sequence[LearnedFact]) -> None:
        news = [self._remember(SharedFact(f, self.replica)) for f in facts
                if self._shareable(f) and self._is_news(f)]
        if not news or self._status != "ok":
            return  # while degraded it is published at the resync
        try:
            await self._publish(news)
        except FAILURES as exc:
            self.degrade(exc)

    @asynccontextmanager
    async def probe_turn(self, model: str) -> AsyncIterator[bool]:
        name = normalise_model_name(model)
        lock = self.client.lock(self._key("probe", name), timeout=PROBE_LOCK_TTL, sleep=0.05,
                                blocking_timeout=self._probe_wait)
        got, probed = False, False
        if self._status == "ok":
            try:
                got = bool(await lock.acquire())
                probed = got and bool(await self.client.exists(self._key("probed", name)))
                if probed:  # its facts may still be on their way over pub/sub: read them now
                    await self._load([self._key("facts", name)])
            except FAILURES as exc:
                self.degrade(exc)
        try:
            yield not probed
        finally:
            if got:
                if not probed:
                    await self._quietly(self.client.set(self._key("probed", name), self.replica,
                                                        ex=PROBED_TTL))
                await self._quietly(lock.release())

    # --- state ------------------------------------------------------------------

    def degrade(self, exc: BaseException) -> None:
        """Go on without Redis; said once per outage, not once per request."""
        if self._status != "degraded" or not self._synced.is_set():
            self._log.warning("redis unavailable (%s): going on with what this replica knows; "
                              "limits are per process until it returns", _describe(exc))
        self._status = "degraded"
        self._synced.set()

    def ok(self) -> bool:
        return self._status == "ok"

    def register_metrics(self, registry: CollectorRegistry) -> None:
        registry.register(_StateCollector(self))

    # --- following the fleet -----------------------------------------------------

    async def _follow(self) -> None:
        while True:
            try:
                async with self.client.pubsub() as pubsub:
                    await pubsub.subscribe(self._key("facts"))
                    stored = await self._load(await self._fact_keys())
                    missing = [f for i, f in self._known.items() if i not in stored]
                    await self._publish(missing)  # learned meanwhile, or lost by Redis
                    self._back(len(stored), len(missing))
                    await self._listen(pubsub)
            except asyncio.CancelledError:
                raise
            except FAILURES as exc:
                self.degrade(exc)
            await asyncio.sleep(RECONNECT_EVERY)

    def _back(self, loaded: int, pushed: int) -> None:
        if self._status != "ok":
            self.resyncs += 1
            self._log.info("redis connected: %d shared facts loaded, %d it lacked published",
                           loaded, pushed)
        self._status = "ok"
        self._synced.set()

    async def _listen(self, pubsub: PubSub) -> None:
        pinged = time.monotonic()
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is not None and message.get("type") == "message":
                await self._apply_values([message["data"]], "the facts channel")
            if time.monotonic() - pinged > PING_EVERY:  # a hung server sends no EOF
                await asyncio.wait_for(self.client.ping(), OP_TIMEOUT)
                pinged = time.monotonic()
            if self._status != "ok":  # a request saw Redis fail: reconnect and resync
                raise ConnectionError("a request found redis unavailable")

    async def _fact_keys(self) -> list[str]:
        keys: list[str] = []
        async for key in self.client.scan_iter(match=self._key("facts", "*"), count=500):
            keys.append(key.decode() if isinstance(key, bytes) else key)
        return keys

    async def _load(self, keys: Sequence[str]) -> set[tuple[str, str]]:
        """Apply every fact stored under `keys`; which (model, fields) Redis holds."""
        values: list[Any] = []
        for key in keys:
            found = await self.client.hgetall(key)
            values.extend(found.values())
        return await self._apply_values(values, "a stored fact")

    async def _apply_values(self, values: Sequence[bytes | str],
                            where: str) -> set[tuple[str, str]]:
        facts, seen = [], set()
        for raw in values:
            shared = self._decode(raw, where)
            if shared is None:
                continue
            seen.add(_ident(shared.fact))
            if self._is_news(shared.fact):
                facts.append(self._remember(shared).fact)
        if facts:
            await anyio.to_thread.run_sync(self._sink.record, facts)
        return seen

    def _decode(self, raw: bytes | str, where: str) -> SharedFact | None:
        try:
            return decode(raw)
        except Refused as exc:
            self.refused += 1
            self._once(raw, "refusing a fact in redis (%s): %s", where, exc)
        except Malformed as exc:
            self.malformed += 1
            self._once(raw, "ignoring a malformed value in redis (%s): %s", where, exc)
        return None

    def _shareable(self, fact: LearnedFact) -> bool:
        why = refusal(fact)
        if why is not None:
            self.refused += 1
            self._once(why, "not sharing a fact about %r: %s", fact.model[:40], why)
        return why is None

    def _once(self, seen: bytes | str, message: str, *args: object) -> None:
        """Log once per distinct value, and at most MAX_KNOWN values in all: a hostile
        writer cannot flood the log or grow this memory."""
        digest = hashlib.sha256(seen if isinstance(seen, bytes) else seen.encode()).hexdigest()
        if digest not in self._bad_seen and len(self._bad_seen) < MAX_KNOWN:
            self._bad_seen.add(digest)
            self._log.warning(message, *args)

    async def _publish(self, facts: Sequence[SharedFact]) -> None:
        if not facts:
            return
        async with self.client.pipeline(transaction=False) as pipe:
            for shared in facts:
                value = encode(shared.fact, shared.replica)
                key = self._key("facts", normalise_model_name(shared.fact.model))
                pipe.hset(key, field_key(shared.fact), value)
                pipe.expire(key, FACTS_TTL)
                pipe.publish(self._key("facts"), value)
            await asyncio.wait_for(pipe.execute(), OP_TIMEOUT)

    def _is_news(self, fact: LearnedFact) -> bool:
        known = self._known.get(_ident(fact))
        return known is None or fact_is_news(dict(known.fact.fields), fact)

    def _remember(self, shared: SharedFact) -> SharedFact:
        """Keep the union for list fields, so the value stored is never narrower."""
        fact = shared.fact
        known = self._known.get(_ident(fact))
        if known is not None:
            fields = dict(fact.fields)
            for name, value in fields.items():
                had = known.fact.fields.get(name)
                if isinstance(value, list) and isinstance(had, list):
                    fields[name] = had + [v for v in value if v not in had]
            shared = SharedFact(LearnedFact(fact.model, fields, fact.source, fact.at,
                                            fact.evidence, fact.upstream), shared.replica)
        self._known[_ident(fact)] = shared
        self._known.move_to_end(_ident(fact))
        while len(self._known) > MAX_KNOWN:
            self._known.popitem(last=False)
        return shared

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    async def _quietly(self, op: Any) -> None:
        try:
            await op
        except FAILURES:
            pass  # locks and markers expire on their own


def _ident(fact: LearnedFact) -> tuple[str, str]:
    return normalise_model_name(fact.model), field_key(fact)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _StateCollector(Collector):
    def __init__(self, state: RedisState) -> None:
        self.state = state

    def collect(self) -> Any:
        out: list[Metric] = [
            GaugeMetricFamily("toolshim_redis_degraded", "1 while Redis is unreachable and the "
                              "replica runs on what it knows (per-process limits).",
                              value=int(self.state.status() != "ok")),
            CounterMetricFamily("toolshim_redis_resyncs", "Times this replica (re)connected to "
                                "Redis and resynchronised its facts.", value=self.state.resyncs),
            CounterMetricFamily("toolshim_redis_malformed_values", "Values read from Redis that "
                                "were not valid facts (ignored).", value=self.state.malformed),
            CounterMetricFamily("toolshim_redis_refused_facts", "Facts refused on the way in "
                                "or out of Redis: they set configuration, or name a model "
                                "longer than 256 characters.", value=self.state.refused)]
        return iter(out)

    def describe(self) -> Any:
        return iter(())
