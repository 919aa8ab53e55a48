"""What the routes share for the app's life: clients, store, limits, telemetry.

Built once in the lifespan (app.py) and hung on `app.state.services`; there is
no module-level state anywhere else.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from cachetools import TTLCache

from proxy.backends.ollama import OllamaState
from proxy.backends.routing import Router
from proxy.backends.upstream import Upstream
from proxy.capabilities.aliases import NO_ALIASES, Aliases
from proxy.capabilities.schema import Capabilities
from proxy.capabilities.store import CapabilityStore
from proxy.observability.recent import ConsoleState
from proxy.observability.redact import Redactor
from proxy.observability.telemetry import Telemetry
from proxy.server_tools.host import ToolHost
from proxy.settings import Settings
from proxy.state import MemoryState, SharedState
from proxy.state.limits import Limiter
from proxy.transforms.response.checks import SchemaCache


@dataclass
class Services:
    settings: Settings
    upstreams: dict[str, Upstream]
    store: CapabilityStore
    limiter: Limiter
    telemetry: Telemetry
    schema_cache: SchemaCache = field(default_factory=SchemaCache)
    probed: TTLCache[str, bool] = field(default_factory=lambda: TTLCache(4096, 3600))
    background: set[asyncio.Task[Any]] = field(default_factory=set)
    console: ConsoleState = field(default_factory=ConsoleState)
    """recent requests, per-model counters and bench captures for /ui."""
    ollama: OllamaState = field(default_factory=OllamaState)
    """What Ollama upstreams said about themselves and their models (backends/ollama.py)."""

    server_tools: ToolHost | None = None
    """The server tools (proxy/server_tools/host.py); started in the lifespan."""
    state: SharedState = field(default_factory=MemoryState)
    """What this replica shares with the others (proxy/state/; MemoryState alone)."""
    redactor: Redactor = field(default_factory=Redactor)
    """masks every configured secret in what clients and the console see (and the logs)."""

    _aliases: tuple[Capabilities | None, Aliases] = (None, NO_ALIASES)
    """the alias table, built again only when capabilities.yaml was reloaded."""
    router: Router = field(init=False)
    """which upstream serves a model (backends/routing.py); shares `background`."""

    def __post_init__(self) -> None:
        self.router = Router(self.settings, self.upstreams, self.background)

    def aliases(self) -> Aliases:
        caps = self.store.capabilities()
        built_for, table = self._aliases
        if built_for is not caps:
            table = Aliases.build(caps.aliases.items(), self.settings.aliases)
            self._aliases = (caps, table)
        return table

    def served(self, model: str) -> str:
        """The model that serves requests for `model`: its alias's target, else itself."""
        return self.aliases().target(model) or model

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run work after the response (learning writes); keep a reference until done."""
        task = asyncio.get_running_loop().create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
