"""The console's routes: the page at /ui and its JSON API under /admin/.

The API is behind the same key check as every /admin/* path (middleware/keys.py);
the page itself is public and shows only a login form until a key works.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from proxy.api.body import read_body
from proxy.backends.listing import require_listed
from proxy.capabilities.store import now_iso
from proxy.console.models import describe_models
from proxy.console.samples import SAMPLE_TOOLS
from proxy.console.validate import record_validation, run_battery
from proxy.console.yaml_edit import EditError, forget_text, promote_text
from proxy.errors import ApiError, check_model_name
from proxy.observability.recent import CAPTURE_HEADER
from proxy.services import Services

STATIC = Path(__file__).parent / "static"
_ASSETS = {"": ("index.html", "text/html; charset=utf-8"),
           "console.css": ("console.css", "text/css; charset=utf-8"),
           "console.js": ("console.js", "text/javascript; charset=utf-8")}
_BENCH_TIMEOUT = 600.0


def console_routes() -> list[BaseRoute]:
    return [
        Route("/ui", page, methods=["GET"]),
        Route("/ui/{asset}", page, methods=["GET"]),
        Route("/admin/models", models, methods=["GET"]),
        Route("/admin/requests", requests, methods=["GET"]),
        Route("/admin/bench", bench_tools, methods=["GET"]),
        Route("/admin/bench", bench, methods=["POST"]),
        Route("/admin/validate", validate, methods=["POST"]),
        Route("/admin/learned/{model:path}/promote", promote, methods=["POST"]),
        Route("/admin/learned/{model:path}/forget", forget, methods=["POST"]),
    ]


def _json(request: Request, body: Any, status: int = 200) -> Response:
    """The console's JSON answer with every configured secret and the caller's key masked:
    it shows upstream answers (bench), error texts and learned evidence, any of which an
    upstream may have written with the credentials it got."""
    raw = orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
    redactor = _svc(request).redactor.for_request(request.headers)
    return Response(redactor.mask_bytes(raw), status_code=status, media_type="application/json")


def _svc(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def page(request: Request) -> Response:
    asset = _ASSETS.get(request.path_params.get("asset", ""))
    if asset is None:
        raise ApiError(404, f"no route for {request.url.path}")
    data = await anyio.Path(STATIC / asset[0]).read_bytes()
    # The page is self-contained: nothing is ever fetched from another origin.
    return Response(data, media_type=asset[1], headers={
        "cache-control": "no-cache",
        "content-security-policy": "default-src 'self'; img-src 'self' data:; "
                                   "style-src 'self'; script-src 'self'; connect-src 'self'",
        "x-content-type-options": "nosniff"})


async def models(request: Request) -> Response:
    return _json(request, await describe_models(_svc(request)))


async def requests(request: Request) -> Response:
    svc = _svc(request)
    try:
        limit = int(request.query_params.get("limit", "0")) or None
    except ValueError:
        raise ApiError(400, "limit must be an integer", param="limit") from None
    # Prompts are other people's conversations: only an admin key (checked by the edge,
    # middleware/keys.py) reads them; with no admin key configured, nobody does.
    shown = svc.console.keep_prompts and bool(request.scope["state"].get("admin"))
    items = svc.console.recent(prompts=shown)[:limit]
    return _json(request, {"capacity": svc.console.capacity,
                           "prompts_kept": svc.console.keep_prompts, "prompts_shown": shown,
                           "requests": items})


async def bench_tools(request: Request) -> Response:
    return _json(request, {"sample_tools": SAMPLE_TOOLS})


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await read_body(request, _svc(request).settings.max_body_bytes)
    try:
        body = orjson.loads(raw or b"{}")
    except orjson.JSONDecodeError as exc:
        raise ApiError(400, f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


def _model_param(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise ApiError(400, "'model' must be a non-empty string", param="model")
    check_model_name(model)
    return model


def _bench_tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    tools: list[dict[str, Any]] = []
    for name in body.get("sample_tools") or []:
        if name not in SAMPLE_TOOLS:
            raise ApiError(400, f"unknown sample tool {name!r}; known: "
                           f"{', '.join(SAMPLE_TOOLS)}", param="sample_tools")
        tools.append(SAMPLE_TOOLS[name])
    extra = body.get("tools")
    if extra is not None:
        if not isinstance(extra, list) or not all(isinstance(t, dict) for t in extra):
            raise ApiError(400, "'tools' must be a list of tool objects", param="tools")
        tools.extend(extra)
    return tools


async def bench(request: Request) -> Response:
    """Run one chat request through the whole flow and show every stage of it."""
    svc = _svc(request)
    body = await _json_body(request)
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ApiError(400, "'prompt' must be a non-empty string", param="prompt")
    client_sent: dict[str, Any] = {"model": _model_param(body),
                                   "messages": [{"role": "user", "content": prompt}],
                                   "stream": bool(body.get("stream"))}
    tools = _bench_tools(body)
    if tools:
        client_sent["tools"] = tools
    token, capture = svc.console.new_capture()
    try:
        answer = await _through_proxy(request, client_sent, {CAPTURE_HEADER: token})
    finally:
        svc.console.captures.pop(token, None)
    record = svc.console.find(answer.headers.get("x-request-id", ""))
    text = answer.text
    got: Any = text
    if "json" in answer.headers.get("content-type", ""):
        got = answer.json()
    return _json(request, {
        "request_id": answer.headers.get("x-request-id"),
        "client_sent": client_sent,
        "upstream_sent": capture.sent,
        "upstream_answers": capture.answers,
        "client_got": {"status": answer.status_code, "body": got,
                       "headers": {k: v for k, v in answer.headers.items()
                                   if k.startswith("x-toolshim-")}},
        "notes": record["notes"] if record else [],
        "record": record,
    })


async def _through_proxy(request: Request, body: dict[str, Any],
                         extra: dict[str, str]) -> httpx.Response:
    """POST /v1/chat/completions to this same app in process, with the caller's key."""
    headers = dict(extra)
    if "authorization" in request.headers:
        headers["authorization"] = request.headers["authorization"]
    transport = httpx.ASGITransport(app=request.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://toolshim",
                                 timeout=_BENCH_TIMEOUT) as http:
        return await http.post("/v1/chat/completions", json=body, headers=headers)


async def validate(request: Request) -> Response:
    body = await _json_body(request)
    model = _model_param(body)
    # A model no upstream lists is a 404, as chat answers it: six failed checks
    # would be recorded as a learned entry for a model that is nowhere.
    await require_listed(_svc(request).router, model)

    async def send(chat: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        answer = await _through_proxy(request, chat, {})
        try:
            decoded = answer.json()
        except ValueError:
            decoded = answer.text
        return answer.status_code, dict(answer.headers), decoded

    result = await run_battery(model, send)
    at = now_iso()
    await anyio.to_thread.run_sync(record_validation, _svc(request).store, result, at)
    return _json(request, {**result, "at": at})


async def promote(request: Request) -> Response:
    model = request.path_params["model"]
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    return await _edit(request, model, lambda text: promote_text(text, model, today), "promoted")


async def forget(request: Request) -> Response:
    model = request.path_params["model"]
    return await _edit(request, model, lambda text: forget_text(text, model), "forgotten")


async def _edit(request: Request, model: str, transform: Any, done: str) -> Response:
    store = _svc(request).store
    try:
        await anyio.to_thread.run_sync(store.rewrite, transform)
    except EditError as exc:
        raise ApiError(409, str(exc), code="edit_refused") from None
    except (OSError, ValueError) as exc:
        raise ApiError(409, f"capabilities file not changed: {exc}", code="edit_refused") from None
    _svc(request).telemetry.log.info("capabilities: %s %s through the console", model, done)
    return _json(request, {"model": model, "status": done, "generation": store.generation})
