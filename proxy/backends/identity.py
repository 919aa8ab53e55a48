"""What server an upstream is, for people: "ollama 0.12.3", "vllm 0.10.1", "llama.cpp b6000".

Asked once per upstream in the background at start (the log line) and shared with
the Ollama adapter: /api/version goes through `upstream_kind`, whose answer the
adapter reuses, so it is asked once, not twice. An OpenAI-style server is told
apart by what it answers besides /v1: vLLM's /version, llama.cpp's /props; any
other is logged as OpenAI-compatible (its /v1 is left to the requests: a person
reading an upstream's access log sees only what toolshim needed).
Must not: decide anything a request does (it names the server for people only), or
hold a request up: a failed or slow question is logged as unknown.
"""

from __future__ import annotations

from typing import Any

from proxy.backends.ollama import OllamaState, get_json, upstream_kind
from proxy.backends.upstream import Upstream

_MAX_SHOWN = 100
"""characters of a version or owner shown: a hostile server must not fill the log."""


async def identify(state: OllamaState, upstream: Upstream, timeout: float) -> str | None:
    """The kind and version of `upstream`; None when it did not answer at all."""
    kind = await upstream_kind(state, upstream, None, timeout)
    if kind == "ollama":
        return f"ollama {state.versions.get(upstream.root, '')}".rstrip()
    if state.kinds.get(upstream.root, ("unknown", 0.0))[0] == "unknown":
        return None
    version = _text(await get_json(upstream, "/version", timeout), "version")
    if version:
        return f"vllm {version}"
    props = await get_json(upstream, "/props", timeout)
    if isinstance(props, dict) and ("build_info" in props or "default_generation_settings"
                                    in props):
        return f"llama.cpp {_text(props, 'build_info') or '(build not told)'}"
    return "an OpenAI-compatible server (neither /version nor /props says more)"


def _text(found: Any, name: str) -> str | None:
    value = found.get(name) if isinstance(found, dict) else None
    if not isinstance(value, str) or not value.strip():
        return None
    shown = "".join(c for c in value.strip() if c.isprintable())
    return shown[:_MAX_SHOWN]
