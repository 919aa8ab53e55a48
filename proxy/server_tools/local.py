"""Running the tools that need no network: `mock` and `builtin`.

Owns: turning a call's arguments into the result text the model reads, or a
ToolError whose message the model reads instead. Must not: raise anything
else for bad arguments (a model's mistake is a result, not a crash), or
import pydantic or anything heavy at run time: the builtins run in a worker
process (`proxy.server_tools.worker`) that imports this module when it starts.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from proxy.server_tools.calculator import CalculatorError, evaluate, format_number

if TYPE_CHECKING:
    from proxy.capabilities.server_tools import MockTool


class ToolError(Exception):
    """A failed call; the message goes back to the model as `{"error": message}`."""


def as_text(value: Any) -> str:
    """A result as the model reads it: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def run_mock(tool: MockTool, arguments: dict[str, Any]) -> str:
    for row in tool.results:
        if all(arguments.get(key) == value for key, value in row.arguments.items()):
            return as_text(row.result)
    return as_text(tool.result)


def run_builtin_named(name: str, arguments: dict[str, Any]) -> str:
    builtin = BUILTINS.get(name)
    if builtin is None:
        raise ToolError(f"unknown builtin {name[:64]!r}")
    return builtin(arguments)


def _calculator(arguments: dict[str, Any]) -> str:
    expression = arguments.get("expression")
    if not isinstance(expression, str):
        raise ToolError("calculator needs an 'expression' string")
    try:
        return format_number(evaluate(expression))
    except CalculatorError as exc:
        raise ToolError(str(exc)) from None


def _current_time(arguments: dict[str, Any]) -> str:
    zone_name = arguments.get("timezone") or arguments.get("zone") or "UTC"
    if not isinstance(zone_name, str):
        raise ToolError("timezone must be an IANA zone name such as Europe/Paris")
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown timezone {zone_name[:64]!r}; use an IANA name "
                        "such as Europe/Paris") from None
    now = datetime.now(UTC).astimezone(zone)
    return as_text({"timezone": zone_name, "datetime": now.isoformat(timespec="seconds"),
                    "weekday": now.strftime("%A")})


BUILTINS: dict[str, Callable[[dict[str, Any]], str]] = {
    "calculator": _calculator, "current_time": _current_time, "echo": as_text,
}

BUILTIN_PARAMETERS: dict[str, dict[str, Any]] = {
    "calculator": {"type": "object", "required": ["expression"], "properties": {
        "expression": {"type": "string",
                       "description": "Arithmetic, e.g. (2+3)*4 or sqrt(2)/2."}}},
    "current_time": {"type": "object", "properties": {
        "timezone": {"type": "string",
                     "description": "IANA zone name, e.g. Europe/Paris; default UTC."}}},
    "echo": {"type": "object", "properties": {}},
}
"""The schema offered for a builtin whose entry leaves `parameters` out."""
