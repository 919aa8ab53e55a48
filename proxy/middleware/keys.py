"""Which key opens which path: the API and admin keys, in each door's own header.

Owns the key rules (a client key for /v1/*, an admin key for /admin/* when admin keys
are set, /metrics when asked), the three doors' ways of sending a key (OpenAI's
`Authorization: Bearer`, the Anthropic door's `x-api-key`, the Gemini door's
`x-goog-api-key` or `?key=`) and the words of a refusal. Keys are compared in constant
time per key, and a refusal never repeats what was sent.
Must not: send anything, log, or read a request body (the edge answers and logs).
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from urllib.parse import parse_qs

from starlette.types import Scope

from proxy.api.gemini.errors import AUTH_MESSAGE as GEMINI_AUTH_MESSAGE
from proxy.api.messages.errors import AUTH_MESSAGE as ANTHROPIC_AUTH_MESSAGE

_GEMINI_DOORS = ("/v1beta", "/v1/models")
"""where the Gemini API's own key forms are accepted (under /v1/ only the model paths)."""
ANTHROPIC_DOOR = "/v1/messages"
_KEY_HINT = "Send it as 'Authorization: Bearer <key>'."

Refusal = tuple[int, str, str, Sequence[tuple[bytes, bytes]]]
"""(status, code, message, extra headers) of a request the keys do not let through."""


class DoorKeys:
    """The configured keys and the paths they open."""

    def __init__(self, keys: Sequence[str], admin_keys: Sequence[str],
                 protect_metrics: bool) -> None:
        self.admin_keys = [k.encode() for k in admin_keys]
        self.client_keys = [k.encode() for k in keys]
        # An admin key is also a client key (the console's bench runs chats with it).
        self.keys = self.client_keys + self.admin_keys if keys else []
        self.metrics_keys = self.client_keys + self.admin_keys if protect_metrics else []
        self.protected = ("/v1/", "/v1", "/admin")
        self.any = bool(self.keys or self.admin_keys or self.metrics_keys)
        """whether any path needs a key at all (else the edge never asks)."""

    def refusal(self, scope: Scope, authorization: str) -> Refusal | None:
        """None when the key sent opens this path (an admin key marks the request's
        state `admin`); else what to answer."""
        path = scope["path"]
        if self.admin_keys and path.startswith("/admin"):
            if bearer_allowed(authorization, self.admin_keys):
                scope["state"]["admin"] = True  # an admin key was checked, not only some key
                return None
            if self.client_keys and bearer_allowed(authorization, self.client_keys):
                return (403, "admin_key_required",
                        "this key may not use /admin; it needs an admin key (--admin-key)", ())
        elif path.startswith(self.protected):
            if not self.keys or bearer_allowed(authorization, self.keys) \
                    or google_key_allowed(scope, self.keys) \
                    or anthropic_key_allowed(scope, self.keys):
                return None
        elif not (path.startswith("/metrics") and self.metrics_keys) \
                or bearer_allowed(authorization, self.metrics_keys):
            return None
        # The message never repeats what was sent: a mistyped key stays out of
        # client logs and screenshots.
        return (401, "invalid_api_key",
                GEMINI_AUTH_MESSAGE if from_gemini_client(scope) else
                ANTHROPIC_AUTH_MESSAGE if path.startswith(ANTHROPIC_DOOR) else
                f"Invalid or missing API key. {_KEY_HINT}",
                [(b"www-authenticate", b"Bearer")])


def is_gemini_path(path: str) -> bool:
    return path.startswith(_GEMINI_DOORS)


def from_gemini_client(scope: Scope) -> bool:
    """Refused in Google's envelope: the Gemini door, or a Gemini API client (the SDKs
    and Gemini CLI send x-goog-api-key or x-goog-api-client) on a path both APIs share."""
    return scope["path"].startswith("/v1beta") or is_gemini_path(scope["path"]) and any(
        k.startswith(b"x-goog-") for k, _ in scope["headers"])


def google_key_allowed(scope: Scope, keys: Sequence[bytes]) -> bool:
    """On the Gemini door, the key as `x-goog-api-key` (Gemini CLI, the SDKs) or as
    `?key=` (the API's query parameter), compared as `bearer_allowed` compares."""
    if not is_gemini_path(scope["path"]):
        return False
    given = next((v for k, v in scope["headers"] if k == b"x-goog-api-key"), None)
    if given is None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        values = query.get("key")
        given = values[0].encode("latin-1") if values else None
    return _one_of(given, keys)


def anthropic_key_allowed(scope: Scope, keys: Sequence[bytes]) -> bool:
    """On the Anthropic door, the key as `x-api-key` (Claude Code sends ANTHROPIC_API_KEY
    so, ANTHROPIC_AUTH_TOKEN as Bearer), compared as `bearer_allowed` compares."""
    if not scope["path"].startswith(ANTHROPIC_DOOR):
        return False
    return _one_of(next((v for k, v in scope["headers"] if k == b"x-api-key"), None), keys)


def _one_of(given: bytes | None, keys: Sequence[bytes]) -> bool:
    """`given` (stripped) is one of `keys`: compared against every key, without stopping
    early, so the time taken says nothing about how much of a key matched."""
    if given is None:
        return False
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given.strip(), key)
    return ok


def bearer_allowed(header: str, keys: Sequence[bytes]) -> bool:
    """`Authorization: Bearer <one of keys>`, compared in constant time per key."""
    scheme, _, token = header.partition(" ")
    given = token.strip().encode()
    # Compare against every key, without stopping early: constant time per key.
    ok = False
    for key in keys:
        ok |= hmac.compare_digest(given, key)
    return ok and scheme.lower() == "bearer"
