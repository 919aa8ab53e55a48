"""Ask a backend whether a model takes tools: `toolshim probe`.

Owns the two questions (Ollama's /api/show metadata, else one tiny request
with a test tool); the command that prints and records the answers is
commands/probe.py. Every probe returns an Observation or None and never raises:
a backend that does not answer leaves the model unknown, never "off".
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from proxy.backends.refusals import classify_refusal
from proxy.settings import api_url
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


async def _post(
    client: httpx.AsyncClient, url: str, payload: JSON, timeout: float
) -> tuple[int, Any] | None:
    try:
        response = await client.post(url, json=payload, timeout=timeout)
        return response.status_code, orjson.loads(response.content)
    except (httpx.HTTPError, orjson.JSONDecodeError):
        return None
