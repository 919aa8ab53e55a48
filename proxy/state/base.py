"""The interface the flow uses for shared state, and the single-process implementation.

Must not: call back into the flow; an implementation only keeps and hands out
what it is given (facts, probe turns, its status)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Literal, Protocol

from prometheus_client import CollectorRegistry

from proxy.capabilities.learning import LearnedFact

StateStatus = Literal["off", "ok", "degraded"]


class SharedState(Protocol):
    """What a replica shares with the others; every method is safe while the store is down."""

    async def start(self) -> None:
        """Load what the fleet knows (before the first request), then follow it."""

    async def close(self) -> None: ...

    async def share(self, facts: Sequence[LearnedFact]) -> None:
        """Tell the fleet about facts this replica learned (already in its own store)."""

    def probe_turn(self, model: str) -> AbstractAsyncContextManager[bool]:
        """Enter before probing `model`; True when this replica should probe it now."""
        ...

    def status(self) -> StateStatus: ...

    def register_metrics(self, registry: CollectorRegistry) -> None:
        """Add this state's metrics (e.g. whether Redis is degraded) to the app's registry."""


class MemoryState:
    """One process on its own: nothing to share, every probe is this process's."""

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def share(self, facts: Sequence[LearnedFact]) -> None:
        return None

    @asynccontextmanager
    async def probe_turn(self, model: str) -> AsyncIterator[bool]:
        yield True

    def status(self) -> StateStatus:
        return "off"

    def register_metrics(self, registry: CollectorRegistry) -> None:
        return None
