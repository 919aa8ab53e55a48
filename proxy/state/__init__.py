"""What outlives a request and is shared across replicas: learned facts, probe turns, limits.

The flow calls in here; nothing in here calls back into the flow. `MemoryState`
is a single process on its own (no sharing); `RedisState` shares through Redis
and degrades to `MemoryState`'s behaviour whenever Redis is away.
"""

from __future__ import annotations

from proxy.state.base import MemoryState, SharedState
from proxy.state.build import build_state

__all__ = ["MemoryState", "SharedState", "build_state"]
