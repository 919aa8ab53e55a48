"""One chat request's answer, top to bottom, whatever door it came through.

`run_chat`: route, resolve the model's profile (probing unknown
models), then `open_turn`: request steps -> upstream, driven by the pure retry
policy -> response stages -> a `ChatRun` the door writes in its own dialect ->
at `ChatRun.aclose()`, observations to the store and telemetry.

The seam every client dialect (api/) and multi-turn feature builds on:

- `run_chat(ex, chat) -> ChatRun`: one chat request's answer, independent of
  the client's wire format. `run.headers()` before the first byte,
  `async for batch in run.batches()` (`translate.as_chunks(batch)` makes them
  chat.completion.chunk dicts; a failure is raised as `ApiError` after every
  chunk received before it, never after a made-up finish), `await run.aclose()`
  (idempotent; accounts the request),
  then `run.summary` (`RunSummary`: status, error, call counts).
- `open_turn(ex, chat, profile, upstream) -> UpstreamTurn`: ONE upstream turn (a
  limiter slot, the retry ladder of `send_with_retry`, the response stages);
  call it again for a further turn, and `aclose()` each turn.
- The fast path (no tools offered, reasoning passed through) is
  `proxy.flow.plain.relay_as_is`: such chunks travel as the upstream's
  JSON bytes (a whole read of them as `SseFrames`), decoded only by readers that
  need dicts (`as_chunks`).

Must not: know any client's wire format or read the HTTP request body.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import anyio
import httpx

from proxy.asgi.scopes import cancel_scope
from proxy.backends.adapting import MAX_QUIRK_RETRIES, AdaptingSender
from proxy.backends.error_text import client_message
from proxy.backends.listing import require_listed
from proxy.backends.probe import probe_metadata
from proxy.backends.refusals import Refusal, classify_refusal
from proxy.backends.routing import new_call_id
from proxy.backends.sse_frames import wants_usage
from proxy.backends.upstream import Upstream, forward_headers, read_whole
from proxy.capabilities.learning import facts_from
from proxy.capabilities.store import now_iso
from proxy.errors import ApiError, upstream_error_body
from proxy.flow.ahead import Ahead
from proxy.flow.correct import CorrectingTurn
from proxy.flow.exchange import Exchange
from proxy.flow.retry import below_min_validation, initial_plan, next_plan, rung_name
from proxy.flow.run import ChatRun, UpstreamCall, UpstreamTurn
from proxy.flow.send import Offered, send_chat
from proxy.flow.server_loop import offered_server_tools, server_tool_run
from proxy.services import Services
from proxy.transforms.request import apply_request_steps
from proxy.transforms.response import ResponsePipeline, build_pipeline
from proxy.types import ChatRequest, Observation, Plan, Profile


async def run_chat(ex: Exchange, chat: ChatRequest) -> ChatRun:
    """The answer to one chat request, as chunks; the caller must `aclose()` it."""
    svc = ex.svc
    chat = aliased(ex, chat)
    upstream = await svc.router.route(chat["model"])
    ex.record.model, ex.record.upstream = chat["model"], upstream.root
    ex.record.stream = bool(chat.get("stream"))
    await require_listed(svc.router, chat["model"])  # 404 rather than another model
    if svc.settings.log_prompts:
        _log_prompt(ex, chat)
    profile = await profile_with_probe(svc, chat["model"], upstream)
    if svc.server_tools is not None:  # server-side tools: flow/server_loop.py
        svc.server_tools.sync(svc.store.capabilities().server_tools)
        if server := offered_server_tools(svc.server_tools, chat, profile):
            return await server_tool_run(ex, chat, profile, svc.server_tools, server,
                                         lambda c: open_turn(ex, c, profile, upstream))
    turn = await open_turn(ex, chat, profile, upstream)
    if profile.invalid_tool_calls == "correct" and chat.get("tools"):  # flow/correct.py
        turn = CorrectingTurn(ex, chat, profile, turn, lambda c: open_turn(ex, c, profile, upstream))
    return ChatRun(ex, turn)


def aliased(ex: Exchange, chat: ChatRequest) -> ChatRequest:
    """The request for the model that serves it (an alias's target, capabilities/aliases.py);
    every door comes through here before routing and profile resolution."""
    served = ex.svc.served(chat["model"])
    if served == chat["model"]:
        return chat
    ex.record.alias = chat["model"]
    return {**chat, "model": served}


async def open_turn(ex: Exchange, chat: ChatRequest, profile: Profile,
                    upstream: Upstream) -> UpstreamTurn:
    """One upstream turn: a limiter slot, the retry ladder, the response stages.

    The turn owns its upstream call from here; the caller must `aclose()` it.
    """
    svc = ex.svc
    call = await UpstreamCall.open(svc.limiter, upstream)
    first = first_plan(ex, chat, profile)
    # The stages for the first rung are built while the upstream works on the request.
    stages = Ahead(lambda: _stages(ex, chat, profile, first))
    try:
        call.response, plan, sent = await send_with_retry(ex, chat, profile, upstream, first)
        pipeline = stages.take() if plan is first else _stages(ex, chat, profile, plan)
    except BaseException:
        stages.cancel()
        with cancel_scope(shield=True):  # also when the client left
            await call.aclose()
        raise
    return UpstreamTurn(call, pipeline, decode=not (ex.record.stream and _trivial(chat, profile)),
                        fast=svc.settings.fast_paths, tap=ex.tap,
                        usage=sent if wants_usage(chat) else None)


def first_plan(ex: Exchange, chat: ChatRequest, profile: Profile) -> Plan:
    """The rung a request is first sent on (the retry ladder's top for this profile)."""
    has_tools = bool(chat.get("tools"))
    plan = initial_plan(profile, has_tools)
    minimum = ex.svc.settings.min_validation
    if minimum is None or not has_tools:
        return plan
    # --min-validation: a model validated below it gets its requests with tools off;
    # a model never validated is left alone.
    entry = ex.svc.store.learned_entry(profile.model)
    result = entry.validation if entry is not None else None
    if result is None:
        return plan
    gated = below_min_validation(plan, minimum, result.passed, result.total)
    if gated is not plan:
        ex.svc.telemetry.log.info(
            "tools off for %s: validation %d/%d is below --min-validation %s",
            profile.model, result.passed, result.total, minimum)
    return gated


def _stages(ex: Exchange, chat: ChatRequest, profile: Profile, plan: Plan) -> ResponsePipeline:
    """The response stages for an answer sent on `plan`'s rung."""
    return build_pipeline(
        client_tools=chat.get("tools") or [], profile=profile, plan=plan,
        parallel_tool_calls=chat.get("parallel_tool_calls"),
        schema_cache=ex.svc.schema_cache, id_factory=new_call_id)


def _log_prompt(ex: Exchange, chat: ChatRequest) -> None:
    """Whole prompts only when asked for twice: --log-prompts and debug level."""
    log = ex.svc.telemetry.log
    if log.isEnabledFor(logging.DEBUG):
        log.debug("prompt", extra={"record": {
            "request_id": ex.record.request_id, "model": chat["model"],
            "messages": chat["messages"], "tools": chat.get("tools") or []}})


def _trivial(chat: ChatRequest, profile: Profile) -> bool:
    """No stage has work unless a tool call shows up: the fast path may relay bytes."""
    # reasoning: a stream is sniffed (flow/fast_stream.py), unless it starts inside reasoning
    return not chat.get("tools") and not profile.starts_in_reasoning


async def profile_with_probe(svc: Services, model: str, upstream: Upstream) -> Profile:
    """The model's profile; on first sight of an unknown model, ask the backend once."""
    store = svc.store
    if svc.settings.probe and model not in svc.probed:
        svc.probed[model] = True
        if store.has_entry(model):
            return store.profile(model)
        async with svc.state.probe_turn(model) as ours:  # one prober per fleet
            found = None if not ours else await probe_metadata(
                upstream.client, upstream.root, model, timeout=svc.settings.probe_timeout)
            if found is not None:
                facts = facts_from([found], at=now_iso(), upstream=upstream.root)
                await anyio.to_thread.run_sync(store.record, facts)
                await svc.state.share(facts)
    return store.profile(model)


async def send_with_retry(ex: Exchange, chat: ChatRequest, profile: Profile,
                          upstream: Upstream, plan: Plan,
                          ) -> tuple[httpx.Response, Plan, ChatRequest]:
    """Send on `plan`'s rung (`first_plan`); on a recognised refusal step one rung down
    the ladder and resend at once.

    Returns the answer, the rung it came from (`plan` itself if it answered) and the
    body sent (what the model read)."""
    headers = forward_headers(ex.request.headers, upstream,
                              keep_client_auth=not ex.svc.settings.api_keys)
    headers["content-type"] = "application/json"
    headers["accept-encoding"] = "identity"
    # Backend quirks (backends/adapting.py) over the edge that picks /v1 or Ollama's
    # native /api/chat for this model (flow/send.py).
    sender = AdaptingSender(profile, chat, post=lambda sent, current: send_chat(
        ex, upstream, sent, current, headers, Offered(chat, plan)))
    for attempt in range(3 + MAX_QUIRK_RETRIES):
        body, notes = apply_request_steps(chat, sender.profile, plan)
        ex.tap.sent(chat, body)
        t0 = time.perf_counter()
        try:
            response = await sender.send(upstream, body, headers)
        except BaseException:
            # Unreachable, timed out: the wait was the upstream's, not the proxy's overhead.
            ex.upstream_s += time.perf_counter() - t0
            raise
        if response.status_code < 400:
            ex.upstream_s += time.perf_counter() - t0
            ex.record.rung = rung_name(plan)
            _note_request_changes(ex, notes + sender.confirmed())
            return response, plan, body
        raw = await read_whole(response, upstream.root)
        ex.tap.answered(response.status_code, raw)
        await response.aclose()
        ex.upstream_s += time.perf_counter() - t0
        if sender.retry_after(response.status_code, raw, body):
            continue
        refusal = classify_refusal(response.status_code, raw)
        step = next_plan(plan, refusal, profile, attempt) if refusal else None
        if step is None or refusal is None:
            raise _upstream_failure(response.status_code, raw)
        # Its text goes to the console and into learned: entries as evidence.
        refusal = replace(refusal, message=ex.shown(refusal.message))
        ex.observations.append(_refusal_observation(profile, chat, refusal, step))
        ex.record.retries += 1
        ex.svc.telemetry.log.info("retrying %s one rung down: %s", profile.model, rung_name(step),
                                  extra={"record": {"request_id": ex.record.request_id}})
        plan = step
    raise ApiError(502, "upstream kept refusing the request", code="upstream_refused")


def _refusal_observation(profile: Profile, chat: ChatRequest, refusal: Refusal,
                         step: Plan) -> Observation:
    if refusal.kind == "tool_choice" and step.tools == "native":
        choice = chat.get("tool_choice")
        value = choice if isinstance(choice, str) else "function"
        return Observation(profile.model, "tool_choice_refused",
                           {"value": value, "evidence": refusal.message})
    return Observation(profile.model, "tools_refused",
                       {"rung": step.tools, "evidence": refusal.message})


def _note_request_changes(ex: Exchange, notes: list[Observation]) -> None:
    """What the request steps changed on the attempt that answered."""
    for note in notes:
        if note.kind == "tools_stripped":
            ex.record.tools_stripped += int(note.detail.get("count", 0))
        elif note.kind == "tools_emulated":
            ex.record.emulated_chars = int(note.detail.get("chars", 0))
    ex.observations.extend(notes)


def _upstream_failure(status: int, raw: bytes) -> ApiError:
    err = upstream_error_body(status, raw)["error"]
    return ApiError(status, client_message(status, err["message"]), type_=err["type"],
                    param=err["param"],
                    code=err["code"])
