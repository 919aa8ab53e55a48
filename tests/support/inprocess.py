"""Apps started in this process (lifespan entered), each with an httpx client on it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from starlette.applications import Starlette

from proxy.app import create_app
from proxy.settings import Settings


class InProcessApps:
    """`open(**settings)` starts one more app and returns its client; `close()` ends
    them all, last opened first. For fixtures that make apps with varied settings."""

    def __init__(self, make_settings: Callable[..., Settings], timeout: float = 30) -> None:
        self.make_settings = make_settings
        self.timeout = timeout
        self.opened: list[tuple[Any, httpx.AsyncClient]] = []

    async def open(self, **overrides: Any) -> httpx.AsyncClient:
        app: Starlette = create_app(self.make_settings(probe=False, **overrides))
        lifespan = app.router.lifespan_context(app)
        await lifespan.__aenter__()
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://toolshim", timeout=self.timeout)
        self.opened.append((lifespan, http))
        return http

    async def close(self) -> None:
        for lifespan, http in reversed(self.opened):
            await http.aclose()
            await lifespan.__aexit__(None, None, None)
        self.opened.clear()
