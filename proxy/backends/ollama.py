"""Ollama's native API at the upstream edge: what kind an upstream is, what a model's
window is, and `POST /api/chat` answered as if it were `/v1/chat/completions`.

I/O only; every decision is in `context.py` and `routing.py`, every translation in
`ollama_request.py` / `ollama_stream.py`. `open_native` hands back an
`httpx.Response` whose body is the OpenAI SSE stream (or completion JSON), so the
relay, the checks and the learning downstream never know which API answered. What
it asks the upstream (/api/version, /api/ps, /api/show) is cached in `OllamaState`,
which lives on the app's Services.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from proxy.backends.ollama_stream import IdFactory, NativeStream, native_completion
from proxy.backends.upstream import Upstream, body_stream, send
from proxy.capabilities.resolve import normalise_model_name
from proxy.errors import ApiError

KIND_RETRY = 30.0
"""seconds before asking again an upstream that did not answer /api/version at all."""
RUNNING_TTL = 2.0
"""seconds a /api/ps answer is trusted: loads and unloads are rare and slow."""
SHOWN_TTL = 600.0
_MAX_JSON = 64 * 1024 * 1024


@dataclass
class ModelLimits:
    maximum: int | None
    """`<arch>.context_length` of /api/show's model_info: the model's own limit."""
    modelfile_ctx: int | None
    """A `num_ctx` the Modelfile sets: the window the model loads with by default."""


@dataclass
class OllamaState:
    kinds: dict[str, tuple[str, float]] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    running: dict[str, tuple[dict[str, int], float]] = field(default_factory=dict)
    shown: dict[tuple[str, str], tuple[ModelLimits, float]] = field(default_factory=dict)
    floors: dict[tuple[str, str], int] = field(default_factory=dict)
    """(upstream, model) -> the largest num_ctx sent: never ask for less again."""
    asking: dict[str, asyncio.Task[Any]] = field(default_factory=dict)
    """upstream root -> its GET /api/version in flight, shared by all who ask meanwhile."""

    def floor(self, root: str, model: str) -> int:
        return self.floors.get((root, normalise_model_name(model)), 0)

    def raise_floor(self, root: str, model: str, num_ctx: int) -> None:
        key = (root, normalise_model_name(model))
        self.floors[key] = max(self.floors.get(key, 0), num_ctx)


async def upstream_kind(state: OllamaState, upstream: Upstream, override: str | None,
                        timeout: float) -> str:
    """"ollama" when GET /api/version answers with a version, else "openai"; asked once."""
    if override is not None:
        return override
    known = state.kinds.get(upstream.root)
    if known is not None and (known[0] != "unknown" or time.monotonic() - known[1] < KIND_RETRY):
        return "openai" if known[0] == "unknown" else known[0]
    found = await _version(state, upstream, timeout)
    if found is None:
        kind = "unknown"  # unreachable: ask again later, treat as /v1 meanwhile
    else:
        version = found.get("version") if isinstance(found, dict) else None
        kind = "ollama" if isinstance(version, str) and version else "openai"
        if kind == "ollama":
            state.versions[upstream.root] = str(version)
    state.kinds[upstream.root] = (kind, time.monotonic())
    return "openai" if kind == "unknown" else kind


async def _version(state: OllamaState, upstream: Upstream, timeout: float) -> Any | None:
    """GET /api/version, once for all who ask at the same time (start-up's identification
    and the first requests that need the kind)."""
    root = upstream.root
    asking = state.asking.get(root)
    if asking is None:
        asking = asyncio.get_running_loop().create_task(_ask_version(upstream, timeout))
        state.asking[root] = asking
        asking.add_done_callback(lambda _: state.asking.pop(root, None))
    return await asyncio.shield(asking)


async def _ask_version(upstream: Upstream, timeout: float) -> Any | None:
    """The answer's JSON ({} for a 4xx or a body that is not JSON: a server that is
    not Ollama), None when nothing answered (asked again after KIND_RETRY)."""
    try:
        response = await upstream.client.get("/api/version", timeout=timeout,
                                             headers=_auth(upstream))
    except httpx.HTTPError:
        return None
    if response.status_code >= 500:  # a gateway whose backend is down: not an answer
        return None
    found = _json_or_none(response)
    return found if found is not None else {}


async def running_window(state: OllamaState, upstream: Upstream, model: str,
                         timeout: float) -> int | None:
    """The context_length /api/ps reports for `model` if it is loaded, else None."""
    cached = state.running.get(upstream.root)
    if cached is None or time.monotonic() - cached[1] > RUNNING_TTL:
        found = await get_json(upstream, "/api/ps", timeout)
        loaded: dict[str, int] = {}
        entries = found.get("models") if isinstance(found, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            name = entry.get("model") or entry.get("name") if isinstance(entry, dict) else None
            size = entry.get("context_length") if isinstance(entry, dict) else None
            if isinstance(name, str) and isinstance(size, int) and size > 0:
                loaded[normalise_model_name(name)] = size
        cached = state.running[upstream.root] = (loaded, time.monotonic())
    return cached[0].get(normalise_model_name(model))


async def model_limits(state: OllamaState, upstream: Upstream, model: str,
                       timeout: float) -> ModelLimits:
    key = (upstream.root, normalise_model_name(model))
    cached = state.shown.get(key)
    if cached is not None and time.monotonic() - cached[1] < SHOWN_TTL:
        return cached[0]
    found = await _post_json(upstream, "/api/show", {"model": model}, timeout)
    limits = parse_show(found)
    state.shown[key] = (limits, time.monotonic())
    return limits


def parse_show(found: Any) -> ModelLimits:
    """/api/show's model_info `<arch>.context_length` and the Modelfile's num_ctx."""
    if not isinstance(found, dict):
        return ModelLimits(None, None)
    raw = found.get("model_info")
    info: dict[str, Any] = raw if isinstance(raw, dict) else {}
    arch = info.get("general.architecture")
    maximum = info.get(f"{arch}.context_length") if isinstance(arch, str) else None
    if not isinstance(maximum, int):
        maximum = next((v for k, v in info.items()
                        if k.endswith(".context_length") and isinstance(v, int)), None)
    modelfile_ctx = None
    for line in str(found.get("parameters") or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "num_ctx" and parts[1].isdigit():
            modelfile_ctx = int(parts[1])
    return ModelLimits(maximum if maximum and maximum > 0 else None, modelfile_ctx)


async def get_json(upstream: Upstream, path: str, timeout: float) -> Any | None:
    try:
        response = await upstream.client.get(path, timeout=timeout, headers=_auth(upstream))
    except httpx.HTTPError:  # a metadata question never fails a request
        return None
    return _json_or_none(response)


async def _post_json(upstream: Upstream, path: str, payload: Any, timeout: float) -> Any | None:
    try:
        response = await upstream.client.post(path, content=orjson.dumps(payload),
                                              headers={"content-type": "application/json",
                                                       **_auth(upstream)},
                                              timeout=timeout)
    except httpx.HTTPError:
        return None
    return _json_or_none(response)


def _auth(upstream: Upstream) -> dict[str, str]:
    """The upstream's own key (`--upstream-key-env`): a gateway in front of Ollama that
    wants it on /v1 wants it on /api too, or its 401 would make it look like no Ollama."""
    return {"authorization": f"Bearer {upstream.api_key}"} if upstream.api_key else {}


def _json_or_none(response: httpx.Response) -> Any | None:
    if response.status_code != 200:
        return None
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None


Finished = Callable[[int | None], None]
"""Called once with the answer's prompt_eval_count when a native answer completes."""


async def open_native(upstream: Upstream, body: dict[str, Any], headers: dict[str, str], *,
                      include_usage: bool, id_factory: IdFactory,
                      finished: Finished) -> httpx.Response:
    """POST /api/chat; a 2xx comes back translated, an error as Ollama sent it.

    Native errors are `{"error": "..."}`, which the refusal table and the error
    envelope already read (docs/backends.md R2, R7), so they pass through untouched.
    """
    response = await send(upstream, "POST", "/api/chat", content=orjson.dumps(body),
                          headers=headers)
    if response.status_code >= 400:
        return response
    model, created = str(body.get("model", "")), int(time.time())
    completion_id = "chatcmpl-" + id_factory().removeprefix("call_")
    if body.get("stream"):
        translator = NativeStream(model, created, completion_id, include_usage=include_usage,
                                  id_factory=id_factory)
        stream: httpx.AsyncByteStream = _Translated(response, translator, finished)
        ctype = "text/event-stream"
    else:
        stream = _Whole(response, model, created, completion_id, id_factory, finished)
        ctype = "application/json"
    return httpx.Response(response.status_code, headers={"content-type": ctype},
                          stream=stream)


class _Translated(httpx.AsyncByteStream):
    """The upstream NDJSON body, read as it arrives, handed on as OpenAI SSE.

    Read by a task (`async for`), or, while the relay waits, translated in the
    upstream's read callback and pushed on (`wait_pushed`, as the wire's own bodies
    do): a slow native stream then wakes no task per line, like a /v1 one. Either
    way a line that fails comes out as `ApiError` after the frames before it.
    """

    def __init__(self, response: httpx.Response, translator: NativeStream,
                 finished: Finished) -> None:
        self.response = response
        self.translator = translator
        self.finished = finished
        self.reported = False
        self.ended = False
        """the upstream body is read to its end (its connection may be another's now)."""
        self.error: Exception | None = None
        """what a pushed read ended with: raised by the next read, where the task would
        have met it."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        translator = self.translator
        # A broken transport raises as it is: the reader maps it (flow/run.py Turn).
        pieces = aiter(body_stream(self.response))
        while True:
            self._raise_pushed_error()
            piece = await anext(pieces, None)
            if piece is None:
                break
            out = translator.feed(piece)
            # Before yielding: the relay stops reading at the answer's [DONE].
            self._report()
            if out:
                yield out
            if translator.failure is not None:
                raise translator.failure
        self.ended = True
        tail = translator.end()
        self._report()
        if tail:
            yield tail
        if translator.failure is not None:
            raise translator.failure

    async def wait_pushed(self, push: Callable[[bytes], bool]) -> None:
        """Wait while each read is translated and given to `push` in the read callback
        (the wire's `wait_pushed`); returns as that does, or at once for another
        transport's body and once the body has ended."""
        wait = getattr(body_stream(self.response), "wait_pushed", None)
        if wait is None or self.ended or self.error is not None:
            return
        translator = self.translator

        def translated(piece: bytes) -> bool:
            try:
                out = translator.feed(piece)
                self._report()
            except Exception as exc:  # noqa: BLE001 - not lost: the next read raises it
                self.error = exc
                return False
            if translator.failure is not None:
                self.error = translator.failure
                if out:
                    push(out)  # the lines before the bad one, then the failure
                return False
            return push(out) if out else not translator.done

        await wait(translated)

    def _raise_pushed_error(self) -> None:
        error, self.error = self.error, None
        if error is not None:
            raise error

    def _report(self) -> None:
        if self.translator.done and not self.reported:
            self.reported = True
            self.finished(self.translator.prompt_eval_count)

    async def aclose(self) -> None:
        await self.response.aclose()


class _Whole(httpx.AsyncByteStream):
    """The upstream's one JSON answer, handed on as one OpenAI completion."""

    def __init__(self, response: httpx.Response, model: str, created: int,
                 completion_id: str, id_factory: IdFactory, finished: Finished) -> None:
        self.response = response
        self.meta = (model, created, completion_id)
        self.id_factory = id_factory
        self.finished = finished

    async def __aiter__(self) -> AsyncIterator[bytes]:
        parts: list[bytes] = []
        size = 0
        async for piece in body_stream(self.response):  # transport errors: as _Translated
            size += len(piece)
            if size > _MAX_JSON:
                raise ApiError(502, "upstream answer is too large", code="upstream_invalid")
            parts.append(piece)
        try:
            obj = orjson.loads(b"".join(parts))
        except orjson.JSONDecodeError:
            obj = None
        model, created, completion_id = self.meta
        completion = native_completion(obj, model=model, created=created,
                                       completion_id=completion_id, id_factory=self.id_factory)
        self.finished(completion["usage"]["prompt_tokens"] or None)
        yield orjson.dumps(completion)

    async def aclose(self) -> None:
        await self.response.aclose()
