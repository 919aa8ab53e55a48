"""Safe repairs of one tool call, used by `checks.check_call` under "repair".

Owns: fixing a tool name's case, the JSON repair ladder applied to arguments
(via `formats.jsonish`), and decoding an object/array that a model wrote as a
string where the client's schema wants an object/array.

Must not: guess (a name matching several tools, truncated JSON, a string the
schema allows as a string), mutate its inputs, or do I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from proxy.formats.jsonish import loads_lenient, loads_strict

_CONTAINER_TYPES = {"object": dict, "array": list}


def repair_name(
    name: str, offered: Mapping[str, Any], reverse_rename: Mapping[str, str]
) -> str | None:
    """The one client tool name equal to `name` ignoring case, else None.

    Small models often capitalise (`Get_Weather`); a rename's upstream name
    counts too, mapped back to the client's name.
    """
    wanted = name.casefold()
    matches = {client for client in offered if client.casefold() == wanted}
    matches |= {
        client
        for upstream, client in reverse_rename.items()
        if upstream.casefold() == wanted and client in offered
    }
    return matches.pop() if len(matches) == 1 else None


def repair_arguments(text: str) -> tuple[dict[str, Any], tuple[str, ...]] | None:
    """Arguments through the lenient ladder; must end up a JSON object."""
    result = loads_lenient(text)
    if result is None or not isinstance(result[0], dict):
        return None
    return result


def repair_to_schema(
    arguments: dict[str, Any], schema: Any
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Decode top-level string values the schema types as object/array.

    Models double-encode nested objects (`"filter": "{\\"a\\": 1}"`); decoded
    only when the property's schema names exactly that container type and the
    string strictly decodes to it, so a string the client wants stays a string.
    """
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return arguments, ()
    repaired = dict(arguments)
    for key, value in arguments.items():
        wanted = _container_type(properties.get(key))
        if wanted is None or not isinstance(value, str):
            continue
        decoded = loads_strict(value)
        if isinstance(decoded, wanted):
            repaired[key] = decoded
    if repaired == arguments:
        return arguments, ()
    return repaired, ("string_in_string",)


def _container_type(schema: Any) -> type | None:
    if not isinstance(schema, dict):
        return None
    declared = schema.get("type")
    return _CONTAINER_TYPES.get(declared) if isinstance(declared, str) else None
