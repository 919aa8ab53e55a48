"""Ask a backend whether a model takes tools: `toolshim probe`.

Owns the two questions (Ollama's /api/show metadata, else one tiny request
with a test tool) and the CLI that prints answers and records them through
CapabilityStore. Every probe returns an Observation or None and never raises:
a backend that does not answer leaves the model unknown, never "off".
"""

from __future__ import annotations

import asyncio
import ssl
from datetime import UTC, datetime
from typing import Any, TextIO

import httpx
import orjson

from proxy.backends.probe_failures import (
    EXIT_MODEL_NOT_FOUND,
    EXIT_OK,
    diagnose,
    diagnose_listing,
)
from proxy.backends.refusals import classify_refusal
from proxy.capabilities.store import CapabilityStore
from proxy.flow.learning import facts_from
from proxy.settings import api_url, redact_url
from proxy.types import JSON, Observation

_PROBE_TOOL: JSON = {
    "type": "function",
    "function": {
        "name": "toolshim_probe",
        "description": "Connectivity check. Do not call this tool.",
        "parameters": {"type": "object", "properties": {}},
    },
}


def server_root(url: str) -> str:
    """The server root of an upstream given with or without a trailing /v1."""
    root = url.rstrip("/")
    return root.removesuffix("/v1")


async def probe_metadata(
    client: httpx.AsyncClient, root_url: str, model: str, timeout: float = 2.0
) -> Observation | None:
    """Ollama's /api/show `capabilities` (v0.6.4+); None when the server can't say."""
    body = await _post(client, f"{root_url}/api/show", {"model": model}, timeout)
    if body is None or body[0] != 200 or not isinstance(body[1], dict):
        return None
    caps = body[1].get("capabilities")
    if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
        return None  # Ollama before v0.6.4 has no capabilities key
    evidence = f"/api/show capabilities: [{', '.join(caps)}]"
    return Observation(model, "probe", {"tools": "tools" in caps, "evidence": evidence})


async def probe_request(
    client: httpx.AsyncClient, root_url: str, model: str, timeout: float = 5.0
) -> Observation | None:
    """One tiny chat request with a test tool: accepted, refused, or no answer (None)."""
    request = {
        "model": model,
        "messages": [{"role": "user", "content": "Reply with OK."}],
        "tools": [_PROBE_TOOL],
        "max_tokens": 16,
        "stream": False,
    }
    url = api_url(root_url, "/v1/chat/completions")
    try:
        response = await client.post(url, json=request, timeout=timeout)
    except httpx.HTTPError:
        return None
    if response.status_code == 200:
        evidence = "chat request with one tool: 200"
        return Observation(model, "probe", {"tools": True, "evidence": evidence})
    refusal = classify_refusal(response.status_code, response.content)
    if refusal is not None and refusal.kind == "tools":
        return Observation(model, "probe", {"tools": False, "evidence": refusal.message})
    return None


async def probe_model(client: httpx.AsyncClient, root_url: str, model: str) -> Observation | None:
    """Metadata first (cheap, loads nothing), else a real request."""
    found = await probe_metadata(client, root_url, model)
    return found if found is not None else await probe_request(client, root_url, model)


async def list_models(client: httpx.AsyncClient, root_url: str, timeout: float = 5.0) -> list[str] | None:
    """Model ids from GET /v1/models; None when the upstream can't be listed."""
    try:
        response = await client.get(api_url(root_url, "/v1/models"), timeout=timeout)
        data = orjson.loads(response.content) if response.status_code == 200 else None
    except (httpx.HTTPError, orjson.JSONDecodeError):
        return None
    if not isinstance(data, dict):
        return None
    entries = data.get("data") or []  # Ollama answers "data": null when it has no models
    if not isinstance(entries, list):
        return None
    return [e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str)]


async def run_probe_cli(
    models: list[str], upstreams: list[str], capabilities_path: str, all_models: bool, out: TextIO,
    *, verify: ssl.SSLContext | bool = True,
) -> int:
    """Probe models, print one line each, record the answers.

    0 if every probe answered; else the exit code of the first failure
    (probe_failures: unreachable, model not found, an error status, a timeout).
    """
    roots = [server_root(u) for u in upstreams]
    store = CapabilityStore(capabilities_path)
    failures: list[int] = []
    async with httpx.AsyncClient(verify=verify) as client:
        targets: list[tuple[str, list[str]]] = []
        listings = {root: await list_models(client, root) for root in roots} if models else {}
        for model in models:
            serving = _listing(model, listings)
            if serving is None:  # every upstream lists its models, and none lists this one
                print(f"{model}: not found: no upstream lists it "
                      f"({', '.join(redact_url(r) for r in roots)}); nothing recorded", file=out)
                failures.append(EXIT_MODEL_NOT_FOUND)
            else:
                targets.append((model, serving))
        if all_models:
            for root in roots:
                listed = await list_models(client, root)
                if listed is None:
                    failure = await diagnose_listing(client, root)
                    print(f"{redact_url(root)}: cannot list models: {failure.text}", file=out)
                    failures.append(failure.exit_code)
                targets += [(m, [root]) for m in listed or []]
        for model, candidates in targets:
            code = await _probe_one(client, store, model, candidates, out)
            if code != EXIT_OK:
                failures.append(code)
    return failures[0] if failures else EXIT_OK


def _listing(model: str, listings: dict[str, list[str] | None]) -> list[str] | None:
    """The upstreams to probe `model` on, as chat routes it: those that list it; every
    upstream when some list nothing (they may serve what they do not list); None when
    every upstream lists its models and none lists this one (chat's 404)."""
    names = {model, model + ":latest"} if ":" not in model else {model}
    listing = [root for root, ids in listings.items() if ids and names & set(ids)]
    if listing:
        return listing
    if listings and all(listings.values()):
        return None
    return list(listings)


async def _probe_one(
    client: httpx.AsyncClient, store: CapabilityStore, model: str, roots: list[str], out: TextIO
) -> int:
    for root in roots:
        found = await probe_model(client, root, model)
        if found is not None:
            mode = "native" if found.detail["tools"] else "off"
            at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            await asyncio.to_thread(store.record, facts_from([found], at, root))
            # What the proxy will do is the resolved profile's: an entry under models:
            # (gemma3's shipped `emulate`) wins over what the probe found.
            print(f"{model}: tools {mode} (probe: {found.detail['evidence']}); "
                  f"toolshim uses: {store.profile(model).tools}", file=out)
            return EXIT_OK
    failures = [await diagnose(client, root, model) for root in roots]
    print(f"{model}: unknown: " + "; ".join(f.text for f in failures), file=out)
    return failures[0].exit_code


async def _post(
    client: httpx.AsyncClient, url: str, payload: JSON, timeout: float
) -> tuple[int, Any] | None:
    try:
        response = await client.post(url, json=payload, timeout=timeout)
        return response.status_code, orjson.loads(response.content)
    except (httpx.HTTPError, orjson.JSONDecodeError):
        return None
