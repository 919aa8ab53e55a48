"""Masking secrets in text a person may see: log lines, client answers, the console.

Owns the one masking rule (every secret of at least `MIN_SECRET` characters is
replaced by `MASK`, longest first so none leaks in part). An upstream may repeat
the credentials it got in its error text (a gateway in debug mode, a key check
that quotes the header); the log formatter, the client-facing error paths and
the console all mask with this. Which parts of a request are a client's key is
credentials.py's. Must not: log, or keep state beyond its secrets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import orjson

from proxy.credentials import client_keys

MASK = "[redacted]"
MIN_SECRET = 8
"""shorter strings would mask ordinary words; real keys are long."""

class Redactor:
    """Masks a fixed set of secrets; `with_secrets` adds a request's own."""

    __slots__ = ("secrets",)

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=len,
                                    reverse=True))

    def mask(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def mask_bytes(self, raw: bytes) -> bytes:
        """`raw` as UTF-8 text masked; also a secret written inside a JSON string, where
        `"` and `\\` in it would be escaped. Unchanged bytes when nothing matched."""
        text = raw.decode("utf-8", "replace")
        masked = self.mask(text)
        for secret in self.secrets:
            escaped = orjson.dumps(secret).decode()[1:-1]
            if escaped != secret and escaped in masked:
                masked = masked.replace(escaped, MASK)
        return raw if masked == text else masked.encode()

    def with_secrets(self, more: Iterable[str]) -> Redactor:
        extra = [s for s in more if len(s) >= MIN_SECRET and s not in self.secrets]
        return Redactor((*self.secrets, *extra)) if extra else self

    def for_request(self, headers: Mapping[str, str], query: str = "") -> Redactor:
        """These secrets and every key the request's client sent (credentials.py)."""
        return self.with_secrets(client_keys(headers, query))
