"""What toolshim says when it starts: one line with everything a person checks first.

The line names the listen address, each upstream, the capabilities file and
how many entries it holds, and whether auth is on (never a key). What kind of
server each upstream is and its version is asked in the background, with a
short timeout, and logged once known: start never waits for a backend.
"""

from __future__ import annotations

import gc
import logging
from typing import Any

import httpx
import orjson

from proxy.backends.upstream import Upstream
from proxy.capabilities.schema import Capabilities
from proxy.settings import Settings, redact_url

_ASK_TIMEOUT = 1.0


def freeze_startup_heap() -> None:
    """Take what is loaded before serving (modules, settings, the app) out of the
    cyclic collector's reach for the process's life (`gc.freeze`).

    Requests make short-lived containers by the thousand, so the collector runs
    often; its occasional full pass walked every object imported at start, a
    pause of milliseconds in whichever request triggered it (W1's p99). Only for
    a server process: in a test process, apps come and go.

    The young generation is collected every 7,000 new containers instead of 700:
    a small request makes several hundred, so it was collected every request or
    two (2% of W1's instructions in callgrind); the older ones as by default.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(7000, 10, 10)


def startup_line(settings: Settings, caps: Capabilities, log: logging.Logger) -> None:
    upstreams = [redact_url(root) for root in settings.all_upstreams()]
    entries = len(caps.models) + len(caps.learned)
    auth = f"on ({len(settings.api_keys)} keys)" if settings.api_keys else "off"
    log.info("toolshim listening on http://%s:%d; upstreams: %s; capabilities: %s "
             "(%d entries); auth: %s", settings.host, settings.port, ", ".join(upstreams),
             settings.capabilities, entries, auth,
             extra={"record": {"listen": f"{settings.host}:{settings.port}",
                               "upstreams": upstreams, "capabilities": settings.capabilities,
                               "capability_entries": entries, "auth": bool(settings.api_keys)}})


async def log_upstream_kind(upstream: Upstream, log: logging.Logger) -> None:
    """Best effort: 'upstream URL is ollama 0.12.3'; silent when the server can't say."""
    try:
        kind = await identify(upstream.client, upstream.root)
    except httpx.HTTPError:
        return
    if kind:
        log.info("upstream %s is %s", redact_url(upstream.root), kind,
                 extra={"record": {"upstream": redact_url(upstream.root), "kind": kind}})


async def identify(client: httpx.AsyncClient, root: str) -> str | None:
    """Ollama answers /api/version, vLLM /version, llama.cpp /props (its build)."""
    version = await _field(client, f"{root}/api/version", "version")
    if version:
        return f"ollama {version}"
    version = await _field(client, f"{root}/version", "version")
    if version:
        return f"vllm {version}"
    build = await _field(client, f"{root}/props", "build_info")
    return f"llama.cpp {build}" if build else None


async def _field(client: httpx.AsyncClient, url: str, name: str) -> str | None:
    found = await _json(client, url)
    value = found.get(name) if isinstance(found, dict) else None
    return value if isinstance(value, str) and len(value) < 100 else None


async def _json(client: httpx.AsyncClient, url: str) -> Any:
    response = await client.get(url, timeout=_ASK_TIMEOUT)
    if response.status_code != 200:
        return None
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None
