"""Which model and method a Gemini API path names. Pure, no I/O.

`/v1beta/models/{model}:{method}`: the model is everything between `models/` and
the last `:`, so Ollama names such as `qwen3:8b` work
(`/v1beta/models/qwen3:8b:generateContent`); the google-genai SDK sends the colon
percent-encoded (`%3A`), which the server has decoded by the time the route sees it.
"""

from __future__ import annotations

METHODS = ("generateContent", "streamGenerateContent", "countTokens")
"""the model methods the door answers; any other is a 404."""


def split_method(rest: str) -> tuple[str, str] | None:
    """(model, method) for the path after `models/`, or None: no method, or no model."""
    model, colon, method = rest.rpartition(":")
    if not colon or not model or not method:
        return None
    return model.removeprefix("models/"), method  # `models/models/x` from a doubled prefix
