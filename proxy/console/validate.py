"""Model validation: a fixed battery of tool-calling checks, run through the proxy.

The battery (documented in docs/console.md) sends six chat requests to the
proxy's own /v1/chat/completions (in process, through the whole flow and its
rewrites) and judges what a client would get back. The result is recorded
under the model's `learned:` entry as `validation: {at, passed, total, failed,
rung}`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from proxy.backends.listing import model_not_found
from proxy.capabilities.learning import LearnedFact
from proxy.capabilities.resolve import normalise_model_name
from proxy.capabilities.store import CapabilityStore
from proxy.console.samples import SAMPLE_TOOLS
from proxy.errors import ApiError

Send = Callable[[dict[str, Any]], Awaitable[tuple[int, dict[str, str], Any]]]
"""posts a chat body to the proxy: (status, response headers, decoded JSON body)."""

WEATHER = SAMPLE_TOOLS["weather"]
CALC = SAMPLE_TOOLS["calculator"]
EVENT_PARAMS = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "priority": {"type": "string", "enum": ["low", "normal", "high"]},
        "when": {"type": "object", "properties": {"date": {"type": "string"},
                                                  "time": {"type": "string"}},
                 "required": ["date", "time"]}},
    "required": ["title", "priority", "when"]}
EVENT = {"type": "function", "function": {
    "name": "create_event", "description": "Put an event in the calendar.",
    "parameters": EVENT_PARAMS}}


@dataclass(frozen=True)
class Check:
    name: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    judge: Callable[[dict[str, Any]], str | None]
    """the answer's message -> None when it passes, else why not."""
    tool_choice: str | None = None


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _calls(message: dict[str, Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            args = orjson.loads(function.get("arguments") or "")
        except orjson.JSONDecodeError:
            args = None
        out.append((str(function.get("name")), args))
    return out


def _weather_for(message: dict[str, Any], count: int, *cities: str) -> str | None:
    calls = _calls(message)
    if len(calls) < count:
        return f"expected {count} get_weather call(s), got {len(calls)}"
    for name, args in calls:
        if name != "get_weather" or not isinstance(args, dict) or \
                not isinstance(args.get("city"), str):
            return f"call {name}({args}) is not get_weather with a city"
    named = " ".join(str(a["city"]).lower() for _, a in calls)
    missing = [c for c in cities if c.lower() not in named]
    return f"no call for {', '.join(missing)}" if missing else None


def _no_call(message: dict[str, Any]) -> str | None:
    if message.get("tool_calls"):
        return f"called {[n for n, _ in _calls(message)]} for a question that needs no tool"
    return None if (message.get("content") or "").strip() else "answered with empty content"


def _any_valid_call(message: dict[str, Any]) -> str | None:
    calls = _calls(message)
    if not calls:
        return "no tool call although tool_choice was required"
    bad = [n for n, a in calls if n not in ("get_weather", "calculate") or not isinstance(a, dict)]
    return f"invalid call(s): {bad}" if bad else None


def _event(message: dict[str, Any]) -> str | None:
    calls = _calls(message)
    if len(calls) != 1 or calls[0][0] != "create_event":
        return f"expected one create_event call, got {[n for n, _ in calls]}"
    errors = sorted(Draft202012Validator(EVENT_PARAMS).iter_errors(calls[0][1]),
                    key=lambda e: list(e.path))
    if errors:
        return f"arguments do not match the schema: {errors[0].message}"
    return None if calls[0][1]["priority"] == "high" else "priority is not 'high'"


_AFTER_RESULT: list[dict[str, Any]] = [
    {"role": "user", "content": "What is the weather in Paris, and then in Tokyo?"},
    {"role": "assistant", "content": "", "tool_calls": [{
        "id": "call_paris0001", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_paris0001", "content": '{"temp_c": 18, "sky": "sunny"}'},
]

BATTERY: tuple[Check, ...] = (
    Check("single_call", _user("What is the weather in Paris right now? Use the tool."),
          [WEATHER], lambda m: _weather_for(m, 1, "Paris")),
    Check("no_call", _user("What is the capital of France? Answer in one word, no tools."),
          [WEATHER, CALC], _no_call),
    Check("required_call", _user("Check the weather somewhere of your choice."),
          [WEATHER, CALC], _any_valid_call, tool_choice="required"),
    Check("two_calls", _user("Get the weather for Paris and for Tokyo, both at once."),
          [WEATHER], lambda m: _weather_for(m, 2, "Paris", "Tokyo")),
    Check("after_tool_result", _AFTER_RESULT, [WEATHER], lambda m: _weather_for(m, 1, "Tokyo")),
    Check("enum_nested_schema", _user(
        "Create a high priority event titled Launch on 2026-12-01 at 09:00."),
        [EVENT], _event),
)
"""The fixed battery; names are what `failed:` lists."""


async def run_battery(model: str, send: Send) -> dict[str, Any]:
    """Run every check against `model` through `send`; the per-check results and rung.

    Raises ApiError 404 model_not_found when every check was answered 404, and 502
    when a check failed for the backend's sake (backend_trouble)."""
    results: list[dict[str, Any]] = []
    rungs: Counter[str] = Counter()
    statuses: set[int] = set()
    answered: list[int] = []
    for check in BATTERY:
        body: dict[str, Any] = {"model": model, "messages": check.messages,
                                "tools": check.tools, "stream": False}
        if check.tool_choice:
            body["tool_choice"] = check.tool_choice
        status, headers, answer = await send(body)
        statuses.add(status)
        answered.append(status)
        if headers.get("x-toolshim-rung"):
            rungs[headers["x-toolshim-rung"]] += 1
        results.append({"name": check.name, **_judge(check, status, answer)})
    if statuses == {404}:
        # Not a model that fails every check: one its upstream does not have (an
        # upstream that does not list its models says so only here). Nothing to record.
        raise model_not_found(model)
    if trouble := [r for r, status in zip(results, answered) if status >= 500]:
        raise backend_trouble(trouble)
    passed = sum(1 for r in results if r["passed"])
    return {"model": model, "passed": passed, "total": len(results),
            "failed": [r["name"] for r in results if not r["passed"]],
            "rung": rungs.most_common(1)[0][0] if rungs else None, "checks": results}


def backend_trouble(failed: list[dict[str, Any]]) -> ApiError:
    """A check the backend failed (unreachable 502, timeout 504, its own 5xx) says
    nothing about the model: the run is not recorded, so an earlier score stands and
    `--min-validation` never turns a model's tools off because a backend was down."""
    return ApiError(502, "not validated, nothing recorded: the backend failed "
                    f"{len(failed)} of {len(BATTERY)} checks ({failed[0]['name']}: "
                    f"{failed[0]['reason']})", code="upstream_unavailable")


def _judge(check: Check, status: int, answer: Any) -> dict[str, Any]:
    if status != 200:
        error = answer.get("error") if isinstance(answer, dict) else None
        message = error.get("message") if isinstance(error, dict) else str(answer)[:200]
        return {"passed": False, "reason": f"HTTP {status}: {message}"}
    try:
        message = answer["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return {"passed": False, "reason": "the answer has no choices[0].message"}
    reason = check.judge(message)
    return {"passed": reason is None, "reason": reason or "ok"}


def record_validation(store: CapabilityStore, result: dict[str, Any], at: str) -> None:
    """Write `validation:` into the model's learned entry, keeping its provenance."""
    name = normalise_model_name(result["model"])
    existing = store.learned_entry(name)
    validation = {"at": at, "passed": result["passed"], "total": result["total"],
                  "failed": result["failed"]}
    if result.get("rung"):
        validation["rung"] = result["rung"]
    store.record([LearnedFact(
        name, {"validation": validation},
        source=existing.source if existing else "observed",
        at=existing.at if existing else at,
        evidence=existing.evidence if existing else "toolshim validate",
        upstream=existing.upstream if existing else None)])
    store.flush()  # a person asked for it: on disk before the answer, not at the next tick
