"""Checking one complete tool call against the tools the client offered.

Owns: the verdict on a call (name offered, arguments a JSON object valid
against the client's own `parameters` schema) under the `invalid_tool_calls`
policy, and `SchemaCache`, the compiled-validator cache the app creates once.

Must not: raise on bad model output, mutate inputs, do I/O (a `$ref` is never
fetched: see `_LOCAL_ONLY`), or hold module state. Repairs live in `repair.py`;
streaming in `assembly.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from cachetools import LRUCache
from jsonschema import exceptions as schema_errors  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]
from referencing import Registry

from proxy.formats.jsonish import loads_strict
from proxy.transforms.response.repair import repair_arguments, repair_name, repair_to_schema
from proxy.types import JSON, InvalidPolicy

_MAX_REASON = 160

_LOCAL_ONLY: Registry[Any] = Registry()
"""No resources and a `retrieve` that always fails. Without an explicit registry
jsonschema fetches a `$ref`'s http(s)/file URL itself, blocking the event loop with
no timeout: a client's schema could make the proxy read local files into
`dropped_calls` reasons, call internal URLs, or freeze. With it, refs resolve only
inside the schema (and jsonschema's bundled metaschemas)."""

_REF_KEYWORDS = ("$ref", "$dynamicRef")


@dataclass(frozen=True)
class CallVerdict:
    """ok: emit the call (as `name`, `arguments`); else dropped for `reason`.

    Under "keep" an invalid call is ok with `reason` still saying what is wrong.
    """

    ok: bool
    name: str
    arguments: str
    fixes: tuple[str, ...] = ()
    reason: str | None = None


class SchemaCache:
    """Compiled validators keyed by the schema's canonical bytes (LRU).

    Agents resend the same tools every turn, so compiling once per schema
    matters; `None` is cached for a schema jsonschema itself rejects, or one
    with a `$ref` outside itself (the client's choice: its calls are not checked
    against it, rather than checked against part of it).
    """

    def __init__(self, maxsize: int = 512) -> None:
        self._validators: LRUCache[bytes, Any] = LRUCache(maxsize=maxsize)

    def validator(self, schema: Any) -> Any:
        try:
            key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        except (orjson.JSONEncodeError, TypeError):
            return None
        if key in self._validators:
            return self._validators[key]
        compiled = _compile(schema)
        self._validators[key] = compiled
        return compiled


def check_call(
    name: str,
    arguments: str,
    offered: Mapping[str, JSON],
    policy: InvalidPolicy,
    reverse_rename: Mapping[str, str],
    cache: SchemaCache,
) -> CallVerdict:
    """Verdict on one complete call; `offered` maps client name -> parameters.

    Blank arguments count as "{}" (Ollama sends {} for zero-argument calls,
    vLLM may send ""). A rename is always reversed: configured, not a repair.
    """
    client = reverse_rename.get(name, name)
    fixes: tuple[str, ...] = ()
    if client not in offered:
        fixed = repair_name(client, offered, reverse_rename) if _repairs(policy) else None
        if fixed is None:
            return _invalid(policy, client, arguments, "unknown_tool")
        client, fixes = fixed, ("name_case",)
    text = arguments if arguments.strip() else "{}"
    parsed = loads_strict(text)
    if not isinstance(parsed, dict):
        reason = "bad_json" if parsed is None and text.strip() != "null" else "not_an_object"
        repaired = repair_arguments(text) if _repairs(policy) else None
        if repaired is None:
            return _invalid(policy, client, arguments, reason, fixes)
        parsed, fixes = repaired[0], fixes + repaired[1]
    schema = offered[client]
    error = _schema_error(cache, schema, parsed)
    if error is not None and _repairs(policy):
        parsed, schema_fixes = repair_to_schema(parsed, schema)
        if schema_fixes:
            fixes = fixes + schema_fixes
            error = _schema_error(cache, schema, parsed)
    if error is not None:
        return _invalid(policy, client, arguments, f"schema: {error}", fixes)
    if fixes and fixes != ("name_case",):
        text = orjson.dumps(parsed).decode()
    return CallVerdict(True, client, text, fixes)


def _repairs(policy: InvalidPolicy) -> bool:
    """`correct` repairs first: the model is asked again only for what repair can't fix."""
    return policy in ("repair", "correct")


def _invalid(
    policy: InvalidPolicy, name: str, arguments: str, reason: str, fixes: tuple[str, ...] = ()
) -> CallVerdict:
    if policy == "keep":
        return CallVerdict(True, name, arguments, (), reason)
    return CallVerdict(False, name, arguments, fixes, reason)


def _compile(schema: Any) -> Any:
    if schema is None:
        schema = {}
    if _refers_outside(schema):
        return None
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
        return cls(schema, registry=_LOCAL_ONLY)
    except (schema_errors.SchemaError, TypeError, AttributeError):
        return None


def _refers_outside(schema: Any) -> bool:
    """Whether any `$ref` / `$dynamicRef` in `schema` is not a fragment (`#...`) of it.

    Such a ref could only be resolved by fetching it; deciding once here keeps the
    verdict from depending on which branch an instance happens to reach. Walks
    iteratively (values of data keywords too: at worst a schema goes unchecked)."""
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            for key in _REF_KEYWORDS:
                ref = node.get(key)
                if isinstance(ref, str) and not ref.startswith("#"):
                    return True
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return False


def _schema_error(cache: SchemaCache, schema: Any, instance: dict[str, Any]) -> str | None:
    validator = cache.validator(schema)
    if validator is None:
        return None
    try:
        error = schema_errors.best_match(validator.iter_errors(instance))
    except (schema_errors.UnknownType, schema_errors.FormatError, LookupError, RecursionError):
        # An unresolvable $ref or custom type is the client's schema problem.
        return None
    except Exception as exc:
        if type(exc).__module__.startswith(("jsonschema", "referencing")):
            return None
        raise
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    message = f"{where}: {error.message}" if where else str(error.message)
    return message[:_MAX_REASON]
