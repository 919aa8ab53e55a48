"""Turn a request's observations into facts worth remembering under `learned:`.

Pure: observations in, LearnedFact values out; the caller supplies the time.
Only findings that change how the next request is handled become facts
(a refused rung, a refused tool_choice value, a recovered text format, a probe
answer); counts such as dropped or repaired calls belong to metrics, not here.
Writing facts to disk is capabilities/store.py's job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from proxy.capabilities.resolve import learned_key
from proxy.capabilities.schema import PROVENANCE
from proxy.settings import redact_url
from proxy.types import Observation

FactSource = Literal["runtime_error", "probe", "observed"]


@dataclass(frozen=True)
class LearnedFact:
    model: str
    fields: Mapping[str, Any]
    source: FactSource
    at: str
    evidence: str | None = None
    upstream: str | None = None
    tag_default: bool = True
    """A new `learned:` key gets Ollama's default tag (`qwen3` -> `qwen3:latest`): true
    unless the model is served by a server that takes names as written (vLLM,
    llama.cpp), where `scripted-hermes` and `scripted-hermes:latest` are not one model
    to a person reading the file or the console."""

    def key(self) -> str:
        """The key this fact's model gets when it is new under `learned:`."""
        return learned_key(self.model) if self.tag_default else self.model.strip()


# The values capabilities.yaml accepts under drop_tool_choice.
_TOOL_CHOICE_KINDS = ("none", "auto", "required", "function")

_Fields = tuple[dict[str, Any], FactSource, str | None]


def _tools_refused(detail: Mapping[str, Any]) -> _Fields | None:
    # The fact, not the rung it led to: `fallback` (the person's) decides the rung.
    if detail.get("rung") not in ("off", "emulate"):
        return None
    return {"tool_support": "refused"}, "runtime_error", _text(detail.get("evidence"))


def _tool_choice_refused(detail: Mapping[str, Any]) -> _Fields | None:
    value = detail.get("value")
    if value not in _TOOL_CHOICE_KINDS:
        return None
    return {"drop_tool_choice": [value]}, "runtime_error", _text(detail.get("evidence"))


def _text_calls_recovered(detail: Mapping[str, Any]) -> _Fields | None:
    name = detail.get("format")
    if not isinstance(name, str) or not name:
        return None
    return {"tool_format": name}, "observed", _text(detail.get("evidence"))


def _probe(detail: Mapping[str, Any]) -> _Fields | None:
    tools = detail.get("tools")
    if not isinstance(tools, bool):
        return None
    found = {"tools": "native"} if tools else {"tool_support": "none"}
    return found, "probe", _text(detail.get("evidence"))


def _quirk(fields: dict[str, Any]) -> Callable[[Mapping[str, Any]], _Fields | None]:
    """A backend quirk (quirks.py) seen and worked around: remember the workaround."""

    def rule(detail: Mapping[str, Any]) -> _Fields | None:
        return dict(fields), "runtime_error", _text(detail.get("evidence"))

    return rule


def _chars_per_token(detail: Mapping[str, Any]) -> _Fields | None:
    value = detail.get("value")
    if not isinstance(value, float) or not 0 < value <= 64:
        return None
    return {"chars_per_token": value}, "observed", _text(detail.get("evidence"))


def _correction(detail: Mapping[str, Any]) -> _Fields | None:
    tried, succeeded = detail.get("tried"), detail.get("succeeded")
    if not isinstance(tried, int) or not isinstance(succeeded, int) or tried < 1:
        return None
    return {"correction": {"tried": tried, "succeeded": min(succeeded, tried)}}, "observed", None


def _reasoning_open(detail: Mapping[str, Any]) -> _Fields | None:
    return {"starts_in_reasoning": True}, "observed", "a reply began inside reasoning"


@dataclass(frozen=True)
class _Rule:
    writes: frozenset[str]
    """the only fields its facts may set (a fact setting any other is not made)."""
    make: Callable[[Mapping[str, Any]], _Fields | None]


def _rule(make: Callable[[Mapping[str, Any]], _Fields | None], *writes: str) -> _Rule:
    return _Rule(frozenset(writes), make)


# Observation kind -> fact; kinds not listed (call_dropped, rung_used, ...) are counts.
_RULES: Mapping[str, _Rule] = {
    # `tools` too: a fact from a replica still on an older toolshim says `tools: off`.
    "tools_refused": _rule(_tools_refused, "tool_support", "tools"),
    "tool_choice_refused": _rule(_tool_choice_refused, "drop_tool_choice"),
    "text_calls_recovered": _rule(_text_calls_recovered, "tool_format"),
    "probe": _rule(_probe, "tools", "tool_support"),
    "stream_tools_failed": _rule(_quirk({"stream_tools": False}), "stream_tools"),
    "required_choice_failed": _rule(_quirk({"required_tool_choice": "rewrite"}),
                                    "required_tool_choice"),
    "null_content_failed": _rule(_quirk({"null_content": False}), "null_content"),
    "chars_per_token": _rule(_chars_per_token, "chars_per_token"),
    "correction": _rule(_correction, "correction"),
    "reasoning_open": _rule(_reasoning_open, "starts_in_reasoning"),
}

_SUPERSEDES: Mapping[str, tuple[str, ...]] = {"tool_support": ("tools",),
                                              "tools": ("tool_support",)}
"""A learned tool fact replaces the other kind: a refusal retires a learned `tools`
(an older file's `tools: off` included), a probe that finds tools a refusal."""

LEARNED_FIELDS: frozenset[str] = frozenset(
    {"validation"}.union(*(rule.writes for rule in _RULES.values())))
"""Every field toolshim itself learns: what the rules above write, plus `validation`
(written by `toolshim validate`, console/validate.py). The rest of a model entry
(server_tools, system_prompt, rename, allow_tools, ollama_options, ...) belongs to
the person who writes capabilities.yaml: a fact from elsewhere (Redis) that sets
any of it is refused, never applied (state/codec.py)."""

_COUNTED = ("correction",)
"""Fields that add up over requests (`{tried, succeeded}`, stamped with `at`): they
are bookkeeping for people, not behaviour, so they never change an entry's provenance."""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def facts_from(
    observations: Sequence[Observation], at: str, upstream: str | None
) -> list[LearnedFact]:
    """The distinct facts the observations imply, in observation order.

    `upstream` is provenance for people (capabilities.yaml, the console, other
    replicas): it is kept without the URL's user:password."""
    upstream = redact_url(upstream) if upstream else upstream
    facts: list[LearnedFact] = []
    seen: set[tuple[str, str]] = set()
    for obs in observations:
        rule = _RULES.get(obs.kind)
        found = rule.make(obs.detail) if rule is not None else None
        if rule is None or found is None or not found[0].keys() <= rule.writes:
            continue
        fields, source, evidence = found
        key = (obs.model, repr(sorted(fields.items())))
        if key in seen:
            continue
        seen.add(key)
        facts.append(LearnedFact(obs.model, fields, source, at, evidence, upstream))
    return facts


def fact_is_news(entry: object | None, fact: LearnedFact) -> bool:
    """Whether `fact` would change the model's learned entry (a mapping or pydantic model).

    Only behaviour fields count: a repeat of a known fact with a new time or
    evidence is not news, so the file is not rewritten for every request.
    """
    known = _as_mapping(entry)
    for name, value in fact.fields.items():
        current = known.get(name)
        if name in _COUNTED:
            return True  # every count is news: the file keeps the running total
        if isinstance(value, (list, tuple)):
            have = current if isinstance(current, (list, tuple)) else ()
            if any(item not in have for item in value):
                return True
        elif current != value:
            return True
    return False


def merge_fact(entry: object | None, fact: LearnedFact) -> dict[str, Any]:
    """The learned entry after `fact`: a new mapping, `entry` is left as it was.

    Fields already known keep their order; list fields become unions; the
    provenance (source, at, evidence, upstream) comes last and is the latest
    fact's, so stale evidence never sits beside a new value.
    """
    known = _as_mapping(entry)
    merged = {k: v for k, v in known.items() if k not in PROVENANCE}
    if "source" in known and all(name in _COUNTED for name in fact.fields):
        for name, value in fact.fields.items():
            merged[name] = _added(merged.get(name), value, at=fact.at)
        # A count, not a finding: the entry's own provenance stays as it was.
        return merged | {k: known[k] for k in PROVENANCE if k in known}
    for name, value in fact.fields.items():
        for old in _SUPERSEDES.get(name, ()):
            merged.pop(old, None)
        if name in _COUNTED:
            merged[name] = _added(merged.get(name), value, at=fact.at)
        elif isinstance(value, (list, tuple)):
            have = merged.get(name)
            items = list(have) if isinstance(have, (list, tuple)) else []
            merged[name] = items + [v for v in value if v not in items]
        else:
            merged[name] = value
    merged["source"] = fact.source
    merged["at"] = fact.at
    for name, extra in (("evidence", fact.evidence), ("upstream", fact.upstream)):
        if extra is not None:
            merged[name] = extra
    return merged


def _added(current: object, value: Mapping[str, Any], at: str) -> dict[str, Any]:
    """A running count: each number in `value` added to `current`'s, stamped `at`."""
    have = _as_mapping(current)
    total = {k: _number(have.get(k)) + _number(v) for k, v in value.items()}
    return {**total, "at": at}


def _number(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _as_mapping(entry: object | None) -> Mapping[str, Any]:
    if entry is None:
        return {}
    if isinstance(entry, Mapping):
        return entry
    dump = getattr(entry, "model_dump", None)
    if callable(dump):  # a pydantic LearnedEntry: only the keys written in the file
        result = dump(exclude_unset=True, by_alias=True)
        if isinstance(result, Mapping):
            return result
    return {}
