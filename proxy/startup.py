"""What toolshim says when it starts: one line with everything a person checks first.

The line names the listen address, each upstream, the capabilities file and
how many entries it holds, and whether auth is on (never a key); the CLI binds
its socket before, so the line is never followed by a bind error. What kind of
server each upstream is and its version is asked in the background, with a
short timeout, and logged once known (backends/identity.py; the answer is
shared with the Ollama adapter); none answering is a warning. Start never waits
for a backend.
"""

from __future__ import annotations

import asyncio
import gc
import logging

import httpx

from proxy.backends.identity import identify
from proxy.backends.ollama import OllamaState
from proxy.backends.upstream import Upstream, fetch_listing
from proxy.capabilities.schema import Capabilities
from proxy.settings import Settings, redact_url


def freeze_startup_heap() -> None:
    """Take what is loaded before serving (modules, settings, the app) out of the
    cyclic collector's reach for the process's life (`gc.freeze`).

    Requests make short-lived containers by the thousand, so the collector runs
    often; its occasional full pass would walk every object imported at start, a
    pause of milliseconds in whichever request triggered it. Only for a server
    process: in a test process, apps come and go.

    The young generation is collected every 7,000 new containers, not CPython's
    700: a small request makes several hundred, so at 700 it would run every
    request or two; the older ones as by default.
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


async def announce_upstreams(state: OllamaState, upstreams: list[Upstream],
                             settings: Settings, log: logging.Logger) -> None:
    """Each upstream's kind, logged once known; one warning when none of them answers
    (every request would fail until one does, and a person should hear why now)."""
    answered = await asyncio.gather(*(_announce(state, u, settings, log) for u in upstreams))
    if upstreams and not any(answered):
        names = [redact_url(u.root) for u in upstreams]
        log.warning("no upstream answered at start: %s (requests fail with 502 until one "
                    "does)", ", ".join(names), extra={"record": {"upstreams": names}})


async def _announce(state: OllamaState, upstream: Upstream, settings: Settings,
                    log: logging.Logger) -> bool:
    if settings.kind_for(upstream.root) is not None:  # a set kind is not asked about
        return await fetch_listing(upstream) is not None
    try:
        kind = await identify(state, upstream, settings.probe_timeout)
    except httpx.HTTPError:
        return False
    if kind:
        log.info("upstream %s is %s", redact_url(upstream.root), kind,
                 extra={"record": {"upstream": redact_url(upstream.root), "kind": kind}})
    return kind is not None
