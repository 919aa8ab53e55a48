"""Learned facts as Redis values: JSON with a schema version and the sender's name.

Pure. A value that is not exactly what `encode` writes (bad JSON, another
schema version, a field capabilities.yaml would reject) raises `Malformed`
and is never applied: a stray or hostile key must not reach anyone's file.
A well-formed fact that sets a field toolshim does not learn (`server_tools`,
`system_prompt`, `rename`, ...: configuration, which only a person writes) or
names a model longer than MAX_MODEL_NAME raises `Refused`, on the way in and
before a replica shares one (`refusal`): Redis carries facts, not configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

import orjson
from pydantic import ValidationError

from proxy.capabilities.learning import LEARNED_FIELDS, FactSource, LearnedFact, merge_fact
from proxy.capabilities.schema import LearnedEntry
from proxy.errors import MAX_MODEL_NAME
from proxy.settings import redact_url

SCHEMA_VERSION = 1
MAX_VALUE_BYTES = 16 * 1024
"""a fact's JSON is a few hundred bytes; past this a value is not read at all."""
_MAX_EVIDENCE = 2000
_SOURCES = get_args(FactSource)


class Malformed(ValueError):
    """A value in Redis that is not a fact this version understands."""


class Refused(Malformed):
    """A fact toolshim will not take from, or give to, the fleet (`refusal`)."""


def refusal(fact: LearnedFact) -> str | None:
    """Why `fact` may not cross Redis, or None: it sets configuration, or its model name
    is longer than any table keyed on names accepts."""
    if len(fact.model) > MAX_MODEL_NAME:
        return f"a model name of {len(fact.model)} characters (more than {MAX_MODEL_NAME})"
    owned = sorted(set(fact.fields) - LEARNED_FIELDS)
    if owned:
        return (f"it sets {', '.join(owned)}: configuration only capabilities.yaml's "
                "models: or defaults: may set")
    return None


@dataclass(frozen=True)
class SharedFact:
    fact: LearnedFact
    replica: str
    """Who learned it (host:pid), for provenance and to skip one's own echoes."""


def encode(fact: LearnedFact, replica: str) -> bytes:
    return orjson.dumps({
        "v": SCHEMA_VERSION, "model": fact.model, "fields": dict(fact.fields),
        "source": fact.source, "at": fact.at,
        "evidence": fact.evidence[:_MAX_EVIDENCE] if fact.evidence else fact.evidence,
        # Credentials in an upstream URL stay in this replica.
        "upstream": redact_url(fact.upstream) if fact.upstream else None,
        # Whether the key takes Ollama's `:latest`: the learning replica knew the
        # upstream's kind, the receiving one may not have asked it yet.
        "tag": fact.tag_default,
        "replica": replica})


def decode(raw: bytes | str) -> SharedFact:
    if len(raw) > MAX_VALUE_BYTES:
        raise Malformed(f"{len(raw)} bytes, more than the {MAX_VALUE_BYTES} a fact may take")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Malformed(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise Malformed("not a JSON object")
    if data.get("v") != SCHEMA_VERSION:
        raise Malformed(f"schema version {data.get('v')!r}, expected {SCHEMA_VERSION}")
    fact = LearnedFact(
        model=_text(data, "model"), fields=_fields(data), source=_source(data),
        at=_text(data, "at"), evidence=_optional(data, "evidence"),
        upstream=_optional(data, "upstream"), tag_default=data.get("tag") is not False)
    try:
        LearnedEntry.model_validate(merge_fact(None, fact))
    except ValidationError as exc:
        raise Malformed(f"not a valid learned entry: {exc.errors()[0]['msg']}") from None
    why = refusal(fact)
    if why is not None:
        raise Refused(f"refused {fact.model[:40]!r}: {why}")
    return SharedFact(fact, _text(data, "replica"))


def field_key(fact: LearnedFact) -> str:
    """The hash field a fact lives under: one per set of behaviour fields."""
    return ",".join(sorted(fact.fields))


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise Malformed(f"{key!r} must be a non-empty string")
    return value


def _optional(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise Malformed(f"{key!r} must be a string or null")
    return value


def _fields(data: dict[str, Any]) -> dict[str, Any]:
    value = data.get("fields")
    if not isinstance(value, dict) or not value:
        raise Malformed("'fields' must be a non-empty object")
    return value


def _source(data: dict[str, Any]) -> FactSource:
    value = data.get("source")
    for source in _SOURCES:
        if value == source:
            return source  # type: ignore[no-any-return]
    raise Malformed(f"'source' must be one of {', '.join(_SOURCES)}")
