"""Pick the shared-state implementation the settings ask for.

Must not: connect or start anything (the lifespan starts what it returns)."""

from __future__ import annotations

import logging

from proxy.settings import Settings
from proxy.state.base import MemoryState, SharedState
from proxy.state.limits import Limiter
from proxy.state.redis_state import FactSink, RedisState, connect
from proxy.state.semaphore import SharedLimiter


def build_state(settings: Settings, sink: FactSink, limiter: Limiter,
                log: logging.Logger) -> tuple[SharedState, Limiter]:
    """The state to share through, and the limiter to use (fleet-wide with --shared-limits)."""
    if not settings.redis_url:
        return MemoryState(), limiter
    state = RedisState(connect(settings.redis_url), settings.redis_prefix, sink,
                       probe_wait=settings.probe_timeout + 1.0, log=log)
    if settings.shared_limits:
        limiter = SharedLimiter(state, settings.max_concurrency, settings.max_queue,
                                settings.queue_timeout)
        state.closers.append(limiter.close)
    return state, limiter
