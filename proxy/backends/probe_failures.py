"""Why `toolshim probe` got no answer, with one exit code per reason.

Asked only after the probes came back empty: one more tiny request, whose
failure is classified instead of swallowed. The exit codes are documented in
README ("toolshim probe"). Must not: retry, or show an upstream URL with its
credentials.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from proxy.settings import api_url, redact_url

EXIT_OK = 0
EXIT_UNDECIDED = 1
"""the backend answered, but neither yes nor no about tools."""
EXIT_UNREACHABLE = 3
EXIT_MODEL_NOT_FOUND = 4
EXIT_UPSTREAM_STATUS = 5
EXIT_TIMEOUT = 6


@dataclass(frozen=True)
class ProbeFailure:
    exit_code: int
    text: str


async def diagnose(client: httpx.AsyncClient, root: str, model: str,
                   timeout: float = 5.0) -> ProbeFailure:
    """Send the smallest chat request and say what stopped the probe."""
    shown = redact_url(root)
    body = {"model": model, "messages": [{"role": "user", "content": "."}], "max_tokens": 1}
    try:
        response = await client.post(api_url(root, "/v1/chat/completions"), json=body,
                                     timeout=timeout)
    except httpx.TimeoutException:
        return ProbeFailure(EXIT_TIMEOUT, f"upstream {shown} timed out after {timeout:g} s")
    except httpx.HTTPError:
        return ProbeFailure(EXIT_UNREACHABLE, f"upstream unreachable ({shown})")
    return from_status(shown, model, response.status_code, response.text)


def from_status(shown: str, model: str, status: int, text: str) -> ProbeFailure:
    if status == 404 and "not found" in text.lower():
        return ProbeFailure(EXIT_MODEL_NOT_FOUND, f"model not found on the upstream ({shown})")
    if status >= 400:
        return ProbeFailure(EXIT_UPSTREAM_STATUS, f"upstream {shown} answered {status}")
    return ProbeFailure(EXIT_UNDECIDED, f"upstream {shown} could not say (no answer)")


async def diagnose_listing(client: httpx.AsyncClient, root: str,
                           timeout: float = 5.0) -> ProbeFailure:
    """Why GET /v1/models gave no list."""
    shown = redact_url(root)
    try:
        response = await client.get(api_url(root, "/v1/models"), timeout=timeout)
    except httpx.TimeoutException:
        return ProbeFailure(EXIT_TIMEOUT, f"upstream {shown} timed out after {timeout:g} s")
    except httpx.HTTPError:
        return ProbeFailure(EXIT_UNREACHABLE, f"upstream unreachable ({shown})")
    if response.status_code >= 400:
        return ProbeFailure(EXIT_UPSTREAM_STATUS,
                            f"upstream {shown} answered {response.status_code}")
    return ProbeFailure(EXIT_UNDECIDED, f"upstream {shown} sent no model list")
