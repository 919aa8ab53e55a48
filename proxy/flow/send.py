"""Which API a chat request goes to upstream, and sending it there.

`send_chat` is the one call the flow makes per upstream attempt. A model whose
profile sets `num_ctx`, `keep_alive` or `ollama_options`, on an upstream that is
Ollama, goes to native `/api/chat`; everything else to `/v1/chat/completions`.
`num_ctx: auto` goes native only when the prompt would not fit in the window the
model has now (or toolshim raised that model's window before, since a request
without num_ctx would make Ollama reload it back down): a prompt that fits keeps
the plain /v1 path. Either way the caller gets an OpenAI-shaped response.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx
import orjson

from proxy.backends.context import (
    DEFAULT_CHARS_PER_TOKEN,
    MIN_LEARN_TOKENS,
    Decision,
    Window,
    estimate_tokens,
    observed_chars_per_token,
    size_window,
)
from proxy.backends.ollama import model_limits, open_native, running_window, upstream_kind
from proxy.backends.ollama_request import to_native
from proxy.backends.prompt_count import watch_prompt_tokens
from proxy.backends.routing import new_call_id
from proxy.backends.sse_frames import wants_usage
from proxy.backends.upstream import Upstream, send
from proxy.errors import ApiError
from proxy.flow.exchange import Exchange
from proxy.transforms.request import apply_request_steps
from proxy.transforms.request.tools import select_tools, tool_name
from proxy.types import ChatRequest, Observation, Plan, Profile

LEARN_DRIFT = 0.15
"""A chars-per-token ratio this far from the known one is worth recording."""


def wants_native(profile: Profile) -> bool:
    return profile.num_ctx is not None or profile.keep_alive is not None \
        or profile.ollama_options is not None


@dataclass(frozen=True)
class Offered:
    """The client's request before the request steps, and the rung it goes on: what an
    emulated tool list (rendered into the prompt, no `tools` left) is made from again
    when the context guard keeps fewer tools."""

    chat: ChatRequest
    plan: Plan


async def send_chat(ex: Exchange, upstream: Upstream, body: ChatRequest, profile: Profile,
                    headers: dict[str, str], offered: Offered | None = None,
                    ) -> httpx.Response:
    """Send one attempt of a chat request: /v1 as it is, or Ollama's /api/chat."""
    content = orjson.dumps(body)
    if not wants_native(profile) or await _kind(ex, upstream) != "ollama":
        return await send(upstream, "POST", "/v1/chat/completions", content=content,
                          headers=headers)
    body, num_ctx, chars, window, trimmed = await _sized(ex, upstream, body, profile,
                                                         len(content), offered)
    if num_ctx is None and profile.keep_alive is None and profile.ollama_options is None:
        response = await send(upstream, "POST", "/v1/chat/completions", content=content,
                              headers=headers)
        if window is None or chars < MIN_LEARN_TOKENS or response.status_code >= 400:
            return response
        # A prompt that fits keeps /v1; its usage teaches the ratio the native path uses.
        return watch_prompt_tokens(response, lambda count: _learn_ratio(
            ex, profile, chars, count, window, "/v1 usage.prompt_tokens"))
    native = to_native(body, num_ctx=num_ctx, keep_alive=profile.keep_alive,
                       ollama_options=dict(profile.ollama_options or ()))
    ex.record.num_ctx = num_ctx

    def finished(prompt_eval_count: int | None) -> None:
        _learn_ratio(ex, profile, chars, prompt_eval_count, num_ctx, "/api/chat prompt_eval_count")

    response = await open_native(upstream, native, headers, include_usage=wants_usage(body),
                                 id_factory=new_call_id, finished=finished)
    if response.status_code < 400:
        if num_ctx is not None:
            ex.svc.ollama.raise_floor(upstream.root, body["model"], num_ctx)
        if trimmed:
            ex.record.tools_stripped += len(trimmed)
            ex.observations.append(Observation(profile.model, "tools_stripped", {
                "count": len(trimmed), "names": trimmed, "reason": "context"}))
    return response


def _removed_tools(before: ChatRequest, after: ChatRequest) -> list[str]:
    """Names of the tools the context guard took out."""
    kept = {tool_name(t) for t in after.get("tools") or []}
    return [tool_name(t) for t in before.get("tools") or [] if tool_name(t) not in kept]


Sized = tuple[ChatRequest, int | None, int, int | None, list[str]]


async def _kind(ex: Exchange, upstream: Upstream) -> str:
    settings = ex.svc.settings
    return await upstream_kind(ex.svc.ollama, upstream, settings.kind_for(upstream.root),
                               settings.probe_timeout)


async def _sized(ex: Exchange, upstream: Upstream, body: ChatRequest, profile: Profile,
                 chars: int, offered: Offered | None) -> Sized:
    """The body to send, the num_ctx to ask for (None: none), its size in characters,
    for `num_ctx: auto` the window the model has now, and the tools the guard took out."""
    floor = ex.svc.ollama.floor(upstream.root, body["model"])
    if isinstance(profile.num_ctx, int):
        return body, max(profile.num_ctx, floor), chars, None, []
    if profile.num_ctx is None:
        return body, floor or None, chars, None, []
    window = await _window(ex, upstream, body, profile, chars, floor)
    decision = size_window(window)
    if decision.action in ("fits", "raise"):
        if decision.action == "raise":
            ex.record.context = "raise"
        return body, decision.num_ctx, chars, max(window.current, window.floor), []
    sent, cap, sent_chars, removed = _guard(ex, body, profile, window, decision, offered)
    return sent, cap, sent_chars, None, removed


async def _window(ex: Exchange, upstream: Upstream, body: ChatRequest, profile: Profile,
                  chars: int, floor: int) -> Window:
    needed = estimate_tokens(chars, _max_tokens(body), profile.chars_per_token)
    svc, timeout = ex.svc, ex.svc.settings.probe_timeout
    current = await running_window(svc.ollama, upstream, body["model"], timeout)
    if current is not None and needed <= current and not floor:
        return Window(needed, current)
    limits = await model_limits(svc.ollama, upstream, body["model"], timeout)
    if current is None:
        current = limits.modelfile_ctx or svc.settings.ollama_default_ctx
    return Window(needed, current, limits.maximum, floor)


def _guard(ex: Exchange, body: ChatRequest, profile: Profile, window: Window,
           decision: Decision, offered: Offered | None,
           ) -> tuple[ChatRequest, int | None, int, list[str]]:
    """Even the largest window allowed is too small: trim tools, reject, or send as is."""
    cap = decision.num_ctx
    guard = profile.context_guard
    if guard == "reject":
        ex.record.context = "reject"
        raise ApiError(400, f"the request needs about {window.needed} tokens, but "
                       f"{profile.model} allows a context window of at most {cap} tokens",
                       param="messages", code="context_length_exceeded")
    if guard == "off":
        ex.record.context = "send"
        return body, cap, len(orjson.dumps(body)), []
    ex.record.context = "trim"
    if offered is not None and offered.plan.tools == "emulate":
        trimmed, removed = _trim_emulated(body, offered, profile, cap or 0)
    else:
        trimmed = _trim(body, profile, cap or 0)
        removed = _removed_tools(body, trimmed)
    return trimmed, cap, len(orjson.dumps(trimmed)), removed


def _trim_emulated(body: ChatRequest, offered: Offered, profile: Profile,
                   cap: int) -> tuple[ChatRequest, list[str]]:
    """`_trim` for tools described in the prompt: the client's tools are trimmed, then
    described again, so the prompt names only the ones kept. Only the messages are
    made again: what else the sender changed in `body` (a quirk's rewrite) stays."""

    def sent_as(chat: ChatRequest) -> ChatRequest:
        return {**body, "messages": apply_request_steps(chat, profile, offered.plan)[0]["messages"]}

    chosen = _trim(offered.chat, profile, cap, sent_as)
    return sent_as(chosen), _removed_tools(offered.chat, chosen)


def _trim(body: ChatRequest, profile: Profile, cap: int,
          sent_as: Callable[[ChatRequest], ChatRequest] | None = None) -> ChatRequest:
    """The most tools (by the max_tools budget rules) whose request fits in `cap`;
    `sent_as` makes the request as it would be sent (emulation), to be measured."""
    tools = body.get("tools")
    if not isinstance(tools, list) or not tools:
        return body

    def keeping(count: int) -> ChatRequest:
        budget = replace(profile, max_tools=count, allow_tools=None, deny_tools=())
        return select_tools(body, budget, Plan("native"))[0]

    def fits(candidate: ChatRequest) -> bool:
        if sent_as is not None:
            candidate = sent_as(candidate)
        chars = len(orjson.dumps(candidate))
        return estimate_tokens(chars, _max_tokens(candidate), profile.chars_per_token) <= cap

    low, high = 0, len(tools) - 1  # the answer is in [low, high]; all tools did not fit
    while low < high:
        middle = (low + high + 1) // 2
        if fits(keeping(middle)):
            low = middle
        else:
            high = middle - 1
    return keeping(low)


def _max_tokens(body: ChatRequest) -> int | None:
    value: Any = body.get("max_completion_tokens", body.get("max_tokens"))
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _learn_ratio(ex: Exchange, profile: Profile, chars: int, prompt_eval_count: int | None,
                 num_ctx: int | None, counted_as: str) -> None:
    """Ollama counted the prompt's tokens: remember this model's characters per token.

    `num_ctx`: the window the prompt went into (a count that fills it was cut)."""
    if prompt_eval_count is None:
        return
    ratio = observed_chars_per_token(chars, prompt_eval_count, num_ctx)
    known = profile.chars_per_token or DEFAULT_CHARS_PER_TOKEN
    if ratio is None or abs(ratio - known) <= known * LEARN_DRIFT:
        return
    ex.observations.append(Observation(profile.model, "chars_per_token", {
        "value": ratio,
        "evidence": f"{counted_as} {prompt_eval_count} for {chars} characters"}))
