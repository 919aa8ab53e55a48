"""anyio cancel scopes for the per-request path, without anyio's per-scope loop lookup.

`anyio.CancelScope()` asks sniffio which event loop is running and looks the
backend up on every construction (then initialises the scope twice): a few
microseconds, several times per request. toolshim only ever runs on asyncio, so
the backend's scope class is looked up once, on first use inside the loop, and
built directly. The scopes are the same objects anyio would have made.
"""

from __future__ import annotations

import math
from typing import Any

import anyio

_scope_class: Any = None


def cancel_scope(*, shield: bool = False, deadline: float = math.inf) -> anyio.CancelScope:
    """`anyio.CancelScope(shield=..., deadline=...)`; must be called on the event loop."""
    global _scope_class
    if _scope_class is None:
        _scope_class = type(anyio.CancelScope())
    scope: anyio.CancelScope = _scope_class(shield=shield, deadline=deadline)
    return scope
