"""GET /admin/capabilities: what the proxy would do for every model it knows of.

Read-only. Known models are the exact names under `models:`, the `learned:`
entries and whatever the upstreams' /v1/models listed; each comes with its
resolved profile and, per field, where the value came from (`Profile.sources`;
fields not listed there are built-in defaults). Globs under `models:` are
shown as patterns, since they only resolve against a concrete name.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from proxy.capabilities.schema import is_glob
from proxy.services import Services
from proxy.settings import redact_url
from proxy.types import Profile


def known_models(svc: Services, *, listed_as: str) -> dict[str, list[str]]:
    """Every model the file names exactly or learned, or an upstream lists: where from."""
    caps = svc.store.capabilities()
    known: dict[str, list[str]] = {}
    for name in caps.models:
        if not is_glob(name):
            known.setdefault(name, []).append("models")
    for name in caps.learned:
        known.setdefault(name, []).append("learned")
    for name in list(svc.router.listing):
        known.setdefault(name, []).append(listed_as)
    return known


async def admin_capabilities(request: Request) -> Response:
    svc: Services = request.app.state.services
    store = svc.store
    caps = store.capabilities()
    known = known_models(svc, listed_as="listing")
    body: dict[str, Any] = {
        "file": svc.settings.capabilities,
        "generation": store.generation,
        "last_reload_error": store.last_error(),
        "patterns": [name for name in caps.models if is_glob(name)],
        "models": {name: _describe(svc, name, origins) for name, origins in sorted(known.items())},
    }
    if svc.server_tools is not None:  # names and states only: never commands, URLs or env
        body["server_tools"] = sorted(caps.server_tools)
        body["mcp_servers"] = svc.server_tools.state()
    # Learned evidence is an upstream's text: masked as everything the console shows.
    raw = orjson.dumps(body, option=orjson.OPT_INDENT_2)
    redactor = svc.redactor.for_request(request.headers)
    return Response(redactor.mask_bytes(raw), media_type="application/json")


def _describe(svc: Services, name: str, origins: list[str]) -> dict[str, Any]:
    profile = svc.store.profile(name)
    fields = asdict(profile)
    sources = dict(fields.pop("sources"))
    fields.pop("model")
    root = svc.router.pick_upstream(name).root
    return {
        "known_from": origins,
        "upstream": redact_url(root),
        "num_ctx": _effective_num_ctx(svc, root, name, profile.num_ctx),
        "profile": fields,
        "server_tools_offered": _server_tools(svc, profile),
        "sources": {key: sources.get(key, "built-in default") for key in fields},
    }


def _effective_num_ctx(svc: Services, root: str, name: str,
                       configured: int | str | None) -> int | str | None:
    """What Ollama is asked for now: the largest window sent so far beats `auto`."""
    floor = svc.ollama.floor(root, name)
    if isinstance(configured, int):
        return max(configured, floor)
    return floor or configured


def _server_tools(svc: Services, profile: Profile) -> list[str]:
    """The server tools this model is offered now (MCP tools of ready servers included)."""
    host = svc.server_tools
    if host is None or profile.tools == "off":
        return []
    return [t["function"]["name"] for t in host.offered(profile.server_tools)]
