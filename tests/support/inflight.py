"""ASGI wrapper that counts requests in flight at a fake backend (most at once, and total)."""

from __future__ import annotations

import threading
from typing import Any


class InFlight:
    def __init__(self, app: Any, path: str = "/v1/chat/completions") -> None:
        self.app = app
        self.path = path
        self.now = 0
        self.most = 0
        self.total = 0
        self._lock = threading.Lock()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        with self._lock:
            self.now += 1
            self.total += 1
            self.most = max(self.most, self.now)
        try:
            await self.app(scope, receive, send)
        finally:
            with self._lock:
                self.now -= 1
