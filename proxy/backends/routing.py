"""Which upstream serves a model: explicit routes, then the upstreams' listings.

Owns the routing state a process keeps for its life (every upstream's
/v1/models answer, when it was asked, the look-ups in flight) and the ids
toolshim gives calls a backend left without one. Must not: send chat requests
(flow/send.py) or know about clients.
"""

from __future__ import annotations

import asyncio
import fnmatch
import secrets
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from proxy.backends.upstream import Upstream, fetch_listing
from proxy.settings import Settings

LISTING_TTL = 10.0
"""seconds a listing is trusted where a miss cannot end in a 404 (an upstream that
lists nothing may serve what it does not list: asking again would change nothing)."""
LISTING_FLOOR = 0.25
"""seconds between two /v1/models look-ups of one upstream. A name the listing lacks
makes toolshim ask again (a model pulled after start is served at once); the floor
keeps a flood of unknown names from flooding the backend with look-ups."""


def new_call_id() -> str:
    """OpenAI-style tool call id, for calls the backend gave none (or a duplicate).

    24 hex digits (96 random bits) drawn in one call to the OS: every native stream
    pays for one, as its completion id."""
    return "call_" + secrets.token_hex(12)


@dataclass
class Router:
    settings: Settings
    upstreams: dict[str, Upstream]
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    """look-ups in flight, shared with the app's other background work (awaited at
    shutdown)."""
    listing: dict[str, str] = field(default_factory=dict)
    """model name -> upstream root, from the upstreams' /v1/models."""
    listed_at: float = float("-inf")
    listing_complete: dict[str, bool] = field(default_factory=dict)
    """upstream root -> its last /v1/models answer named at least one model."""
    _listing_runs: dict[str, asyncio.Task[None]] = field(default_factory=dict, repr=False)
    """upstream root -> its /v1/models look-up in flight."""
    _listing_next: dict[str, asyncio.Task[None]] = field(default_factory=dict, repr=False)
    """upstream root -> the look-up that starts next, awaited by every caller since."""
    _listing_done: dict[str, float] = field(default_factory=dict, repr=False)

    def pick_upstream(self, model: str) -> Upstream:
        """Explicit route first, then whoever lists the model, else the first upstream."""
        return self._routed(model) or self._listed(model) or \
            self.upstreams[self.settings.upstreams[0]]

    async def route(self, model: str) -> Upstream:
        """pick_upstream, but with several upstreams an unlisted model makes toolshim
        ask their /v1/models again (refresh_listing: shared, at most one per floor)."""
        found = self._routed(model) or self._listed(model)
        if found is None and len(self.upstreams) > 1 and self.worth_relisting():
            await self.refresh_listing()
            found = self._listed(model)
        return found or self.upstreams[self.settings.upstreams[0]]

    def worth_relisting(self) -> bool:
        """A miss is worth a new look-up when every upstream lists its models (the name
        is new, or unknown: a 404 is near) or the listing is older than LISTING_TTL;
        an upstream that lists nothing is not asked again for every request."""
        return self.every_upstream_lists() or time.monotonic() - self.listed_at > LISTING_TTL

    def every_upstream_lists(self) -> bool:
        """Every upstream's last listing named a model: one that none names is unknown."""
        return bool(self.upstreams) and \
            all(self.listing_complete.get(root) for root in self.upstreams)

    async def refresh_listing(self) -> None:
        """Ask every upstream for its models, in a look-up that starts after this call.

        Per upstream, one look-up runs at a time and the next one is shared by every
        caller that arrives before it starts; it starts LISTING_FLOOR seconds after the
        last one ended at the earliest. So a model pulled before the request is seen,
        and a flood of unknown names makes at most one look-up per floor."""
        await asyncio.gather(*(self._relist(root) for root in self.upstreams))
        self.listed_at = time.monotonic()

    async def _relist(self, root: str) -> None:
        upcoming = self._listing_next.get(root)
        if upcoming is None:
            upcoming = self._spawn(self._list(root))
            self._listing_next[root] = upcoming
        # Shielded: a client that leaves must not cancel the look-up others wait for.
        await asyncio.shield(upcoming)

    async def _list(self, root: str) -> None:
        running = self._listing_runs.get(root)
        if running is not None:
            await asyncio.wait([running])
        wait = LISTING_FLOOR - (time.monotonic() - self._listing_done.get(root, float("-inf")))
        if wait > 0:
            await asyncio.sleep(wait)
        this = asyncio.current_task()
        assert this is not None
        self._listing_next.pop(root, None)  # callers from now on wait for the next one
        self._listing_runs[root] = this
        try:
            listing = await fetch_listing(self.upstreams[root])
        finally:
            self._listing_runs.pop(root, None)
            self._listing_done[root] = time.monotonic()
        self.listing_complete[root] = bool(listing)
        for entry in listing or []:
            if isinstance(entry.get("id"), str):
                self.listing.setdefault(entry["id"], root)

    def knows(self, model: str) -> bool:
        """An explicit route or an upstream's listing names the model."""
        return (self._routed(model) or self._listed(model)) is not None

    def _routed(self, model: str) -> Upstream | None:
        for route in self.settings.routes:
            if fnmatch.fnmatchcase(model, route.pattern):
                return self.upstreams[route.upstream]
        return None

    def _listed(self, model: str) -> Upstream | None:
        root = self.listing.get(model)
        if root is None and ":" not in model:
            root = self.listing.get(model + ":latest")
        return self.upstreams.get(root) if root else None

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task
