"""POST /v1/chat/completions: the whole flow, top to bottom.

parse -> resolve the model's profile (probing unknown models) -> request steps
-> upstream, driven by the pure retry policy -> response stages ->
observations to the store and telemetry -> respond (stream or not).
Only this module, passthrough.py, upstream.py and the store do I/O.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Coroutine
from typing import Any

import anyio
import httpx
from starlette.requests import Request
from starlette.responses import Response

from proxy.backends.routing import send_chat
from proxy.chat_request import parse_chat_request, read_body
from proxy.errors import ApiError, upstream_error_body
from proxy.exchange import Exchange, now_iso
from proxy.learning import facts_from
from proxy.probe import probe_metadata
from proxy.refusals import Refusal, classify_refusal
from proxy.relay import complete, stream
from proxy.retry import initial_plan, next_plan, rung_name
from proxy.services import Services, new_call_id
from proxy.telemetry import RequestRecord
from proxy.transforms.request import apply_request_steps
from proxy.transforms.response import build_pipeline
from proxy.types import ChatRequest, Observation, Plan, Profile
from proxy.upstream import Upstream, forward_headers


async def chat_completions(request: Request) -> Response:
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id, "chat.completions"))
    try:
        return await _handle(ex)
    except ApiError as exc:
        error = exc
    except Exception:
        # A bug of ours must still end as one clean, logged, OpenAI-shaped error.
        svc.telemetry.log.exception("chat request failed inside toolshim")
        error = ApiError(500, "internal error in toolshim", type_="server_error")
    ex.finish(error.status, error.message)
    response = error.response()
    response.headers["x-toolshim-overhead-ms"] = f"{ex.overhead_ms():.2f}"
    return response


async def _handle(ex: Exchange) -> Response:
    chat = parse_chat_request(await read_body(ex.request, ex.svc.settings.max_body_bytes))
    reply = await _unless_client_leaves(ex.request, _answer(ex, chat))
    if reply is None:
        raise ApiError(499, "client closed the connection", code="client_closed")
    return reply


async def _unless_client_leaves(request: Request,
                                work: Coroutine[Any, Any, Response]) -> Response | None:
    """Run work; a client that hangs up first cancels it, and with it the upstream call.

    Until the response starts nothing else notices a departed client, and a
    non-streaming Ollama answer (or a model load) can keep a GPU busy for minutes.
    """
    done: list[Response] = []
    try:
        async with anyio.create_task_group() as group:
            async def watch() -> None:
                while (await request.receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(watch)
            done.append(await work)
            group.cancel_scope.cancel()
    except BaseExceptionGroup as failure:
        # The work's own error (ApiError...), not a group: the caller maps it.
        raise _first_leaf(failure) from None
    return done[0] if done else None


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


async def _answer(ex: Exchange, chat: ChatRequest) -> Response:
    svc = ex.svc
    upstream = await svc.route(chat["model"])
    ex.record.model, ex.record.upstream = chat["model"], upstream.root
    ex.record.stream = bool(chat.get("stream"))
    if svc.settings.log_prompts:
        _log_prompt(ex, chat)
    profile = await resolve_profile(svc, chat["model"], upstream)
    await svc.limiter.acquire(upstream.root)
    response: httpx.Response | None = None
    handed_to_relay = False
    try:
        response, plan = await send_with_retry(ex, chat, profile, upstream)
        pipeline = build_pipeline(
            client_tools=chat.get("tools") or [], profile=profile, plan=plan,
            parallel_tool_calls=chat.get("parallel_tool_calls"),
            schema_cache=svc.schema_cache, id_factory=new_call_id)
        if ex.record.stream:
            reply = stream(ex, response, pipeline, upstream, trivial=_trivial(chat, profile))
            handed_to_relay = True  # from here the relay closes and releases
            return reply
        return await complete(ex, response, pipeline, upstream)
    finally:
        if not handed_to_relay:
            with anyio.CancelScope(shield=True):  # also when the client left
                if response is not None:
                    await response.aclose()
                await svc.limiter.release(upstream.root)


def _log_prompt(ex: Exchange, chat: ChatRequest) -> None:
    """Whole prompts only when asked for twice: --log-prompts and debug level."""
    log = ex.svc.telemetry.log
    if log.isEnabledFor(logging.DEBUG):
        log.debug("prompt", extra={"record": {
            "request_id": ex.record.request_id, "model": chat["model"],
            "messages": chat["messages"], "tools": chat.get("tools") or []}})


def _trivial(chat: ChatRequest, profile: Profile) -> bool:
    """No stage has work unless a tool call shows up: relay bytes as they are."""
    return not chat.get("tools") and profile.reasoning == "pass"


async def resolve_profile(svc: Services, model: str, upstream: Upstream) -> Profile:
    """The model's profile; on first sight of an unknown model, ask the backend once."""
    store = svc.store
    if svc.settings.probe and model not in svc.probed:
        svc.probed[model] = True
        if store.has_entry(model):
            return store.profile(model)
        found = await probe_metadata(upstream.client, upstream.root, model,
                                     timeout=svc.settings.probe_timeout)
        if found is not None:
            facts = facts_from([found], at=now_iso(), upstream=upstream.root)
            await anyio.to_thread.run_sync(store.record, facts)
    return store.profile(model)


async def send_with_retry(ex: Exchange, chat: ChatRequest, profile: Profile,
                          upstream: Upstream) -> tuple[httpx.Response, Plan]:
    """Send; on a recognised refusal step one rung down the ladder and resend at once."""
    plan = initial_plan(profile, bool(chat.get("tools")))
    headers = forward_headers(ex.request.headers, upstream,
                              keep_client_auth=not ex.svc.settings.api_keys)
    headers["content-type"] = "application/json"
    headers["accept-encoding"] = "identity"
    for attempt in range(3):
        body, notes = apply_request_steps(chat, profile, plan)
        t0 = time.perf_counter()
        response = await send_chat(ex, upstream, body, profile, headers)
        if response.status_code < 400:
            ex.upstream_s += time.perf_counter() - t0
            ex.record.rung = rung_name(plan)
            _note_request_changes(ex, notes)
            return response, plan
        raw = await response.aread()
        await response.aclose()
        ex.upstream_s += time.perf_counter() - t0
        refusal = classify_refusal(response.status_code, raw)
        step = next_plan(plan, refusal, profile, attempt) if refusal else None
        if step is None or refusal is None:
            raise _upstream_failure(response.status_code, raw)
        ex.observations.append(_refusal_observation(profile, chat, refusal, step))
        ex.record.retries += 1
        ex.svc.telemetry.log.info("retrying %s one rung down: %s", profile.model, rung_name(step))
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
    ex.observations.extend(notes)


def _upstream_failure(status: int, raw: bytes) -> ApiError:
    err = upstream_error_body(status, raw)["error"]
    return ApiError(status, err["message"], type_=err["type"], param=err["param"],
                    code=err["code"])
