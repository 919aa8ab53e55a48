"""GET /admin/models: every model the console knows, with provenance, validation, counters."""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import Any

from proxy.api.admin import known_models
from proxy.backends.routing import LISTING_TTL
from proxy.capabilities.schema import BOOKKEEPING, is_glob
from proxy.flow.retry import tool_mode
from proxy.services import Services
from proxy.settings import redact_url


async def describe_models(svc: Services) -> dict[str, Any]:
    if time.monotonic() - svc.router.listed_at > LISTING_TTL:
        await svc.router.refresh_listing()
    caps = svc.store.capabilities()  # the background keeper reloads it, never a request
    known = known_models(svc, listed_as="upstream")
    return {
        "file": svc.settings.capabilities,
        "generation": svc.store.generation,
        "last_reload_error": svc.store.last_error(),
        "min_validation": svc.settings.min_validation,
        "patterns": [name for name in caps.models if is_glob(name)],
        "models": [_model(svc, name, origins) for name, origins in sorted(known.items())],
    }


def _model(svc: Services, name: str, origins: list[str]) -> dict[str, Any]:
    profile = svc.store.profile(name)
    fields = asdict(profile)
    sources = dict(fields.pop("sources"))
    fields.pop("model")
    learned = svc.store.learned_entry(name)
    counters = svc.console.counters.get(name)
    return {
        "name": name,
        "known_from": origins,
        "upstream": redact_url(svc.router.pick_upstream(name).root),
        "tools": tool_mode(profile),  # what a request with tools gets now
        "tool_format": profile.tool_format,
        "profile": fields,
        "sources": {key: source_kind(sources.get(key)) for key in fields},
        "learned": None if learned is None else _shown(learned.model_dump(
            exclude_unset=True, by_alias=True, exclude={"validation"})),
        "promotable": learned is not None and bool(learned.model_dump(
            exclude_unset=True, exclude=set(BOOKKEEPING))),
        "validation": None if learned is None or learned.validation is None
        else learned.validation.model_dump(),
        "counters": counters.as_json() if counters is not None else None,
    }


def _shown(entry: dict[str, Any]) -> dict[str, Any]:
    """A learned entry as shown: a file written before upstreams were stored without
    their user:password may still hold them."""
    upstream = entry.get("upstream")
    return {**entry, "upstream": redact_url(upstream)} if isinstance(upstream, str) else entry


def source_kind(origin: str | None) -> dict[str, str]:
    """Resolver origin ("models:qwen3*", "learned", "defaults") -> kind and label."""
    if origin is None:
        return {"kind": "built-in", "label": "built-in default"}
    if origin.startswith("models:"):
        key = origin.removeprefix("models:")
        return {"kind": "glob" if is_glob(key) else "exact", "label": key}
    return {"kind": origin, "label": origin}
