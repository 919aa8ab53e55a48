"""GET /v1beta/models and /v1beta/models/{model} (and under /v1/): the models toolshim
can serve, in the Gemini API's `Model` shape.

The list is the upstreams' /v1/models merged (as GET /v1/models has it). Under /v1/
the OpenAI listing answers the same path: a request that carries the Gemini API's
own marks (`x-goog-api-key`, `x-goog-api-client`, `?key=`) gets this one.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response

from proxy.api.failures import answer_or_error
from proxy.api.gemini.errors import render
from proxy.api.passthrough import forward, list_models
from proxy.errors import ApiError, check_model_name
from proxy.flow.exchange import Exchange
from proxy.observability.telemetry import RequestRecord
from proxy.services import Services
from proxy.types import JSON

_METHODS = ["generateContent", "streamGenerateContent", "countTokens"]


def is_gemini(request: Request) -> bool:
    """The request comes from a Gemini API client (the SDKs send x-goog-api-client)."""
    headers = request.headers
    return "x-goog-api-client" in headers or "x-goog-api-key" in headers or \
        "key" in request.query_params or request.url.path.startswith("/v1beta/")


def model_entry(model: str, served: str | None = None) -> JSON:
    """`model`'s entry; an alias (`served` its target) is named as asked and describes
    the model that answers for it."""
    base = served or model
    described = f"served by toolshim as {base}" if base != model else "served by toolshim"
    return {"name": f"models/{model}", "baseModelId": base, "version": "toolshim",
            "displayName": base, "description": described,
            "supportedGenerationMethods": _METHODS, "thinking": True}


async def any_models(request: Request) -> Response:
    """GET …/models: the Gemini listing, or (OpenAI clients under /v1/) the OpenAI one."""
    if not is_gemini(request):
        return await list_models(request)
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id, "gemini.models"))
    return await answer_or_error(ex, _list(ex), "gemini models request", render)


async def one_model(request: Request) -> Response:
    """GET …/models/{model}: its entry, or Google's 404 naming it."""
    if not is_gemini(request):
        return await forward(request)
    svc: Services = request.app.state.services
    ex = Exchange(svc, request, RequestRecord(request.state.request_id, "gemini.models"))
    return await answer_or_error(ex, _one(ex, request.path_params["rest"]),
                                 "gemini model request", render)


async def _models(ex: Exchange) -> list[str]:
    svc = ex.svc
    await svc.router.refresh_listing()
    return list(svc.router.listing)


async def _list(ex: Exchange) -> Response:
    models = await _models(ex)
    ex.finish(200)
    return Response(orjson.dumps({"models": [model_entry(m) for m in models]}),
                    media_type="application/json",
                    headers={"x-toolshim-overhead-ms": f"{ex.overhead_ms():.2f}"})


async def _one(ex: Exchange, model: str) -> Response:
    model = model.removeprefix("models/")
    check_model_name(model)
    await _models(ex)
    served = ex.svc.served(model)
    if served != model:
        ex.record.alias = model
    if not ex.svc.router.knows(served):
        named = f"models/{model}" + (f" (an alias of {served})" if served != model else "")
        raise ApiError(404, f"{named} is not found: no upstream of this toolshim "
                       "lists or routes it")
    ex.finish(200)
    return Response(orjson.dumps(model_entry(model, served)), media_type="application/json",
                    headers={"x-toolshim-overhead-ms": f"{ex.overhead_ms():.2f}"})
