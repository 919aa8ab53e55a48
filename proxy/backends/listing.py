"""A client never silently gets another model than it asked for.

Some servers (llama-cpp-python) answer any model name with their default
model, echoing the name asked for. When every upstream lists its models and
none lists the requested one, even after listing again, toolshim answers
OpenAI's 404 `model_not_found` itself. An upstream whose list is empty or
unavailable may serve models it does not list, so then the request goes on.
"""

from __future__ import annotations

from proxy.backends.routing import Router
from proxy.errors import ApiError


async def require_listed(router: Router, model: str) -> None:
    """Raise 404 model_not_found when every upstream's listing leaves `model` out,
    even asked again (a model pulled since the last listing is served at once)."""
    if router.knows(model):
        return
    if router.worth_relisting():
        await router.refresh_listing()  # shared and floored: routing.py
        if router.knows(model):
            return
    if router.every_upstream_lists():
        raise model_not_found(model)


def model_not_found(model: str) -> ApiError:
    return ApiError(404, f"The model `{model}` does not exist or you do not have access to it.",
                    type_="invalid_request_error", param="model", code="model_not_found")
