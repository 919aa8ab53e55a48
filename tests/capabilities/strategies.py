"""Hypothesis strategies for capabilities data: plain dicts as a person writes them."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import strategies as st
from ruamel.yaml import YAML

from proxy.capabilities.resolve import normalise_model_name
from proxy.capabilities.schema import TOOL_FORMATS

# Printable text plus newlines and tabs: what a person puts in a prompt.
text = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), whitelist_characters="\n\t"), max_size=30
)
tool_names = st.lists(st.from_regex(r"[a-z_][a-z0-9_]{0,8}\*?", fullmatch=True), max_size=3)
nullable_text = st.none() | text

SCHEMA_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "drop_keywords": st.lists(st.sampled_from(["$schema", "additionalProperties", "format"])),
    "inline_refs": st.booleans(),
    "collapse_nullable": st.booleans(),
    "max_description_chars": st.none() | st.integers(1, 10_000),
}
PROMPT_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "prepend": nullable_text,
    "append": nullable_text,
    "replace": nullable_text,
}
ENTRY_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "tools": st.sampled_from(["auto", "native", "off", "emulate"]),
    "max_tools": st.none() | st.integers(0, 200),
    "invalid_tool_calls": st.sampled_from(["drop", "repair", "keep"]),
    "allow_tools": st.none() | tool_names,
    "deny_tools": tool_names,
    "rename": st.dictionaries(
        st.from_regex(r"[a-z]{1,6}", fullmatch=True), st.just(""), max_size=3
    ).map(lambda d: {k: f"up_{k}" for k in d}),
    "system_role": st.booleans(),
    "drop_tool_choice": st.lists(st.sampled_from(["none", "auto", "required", "function"])),
    "parallel_tool_calls": st.none() | st.booleans(),
    "tool_format": st.none() | st.sampled_from(sorted(TOOL_FORMATS)),
    "fallback": st.sampled_from(["off", "emulate"]),
    "recover_text_calls": st.booleans(),
    "reasoning": st.sampled_from(["pass", "strip", "move"]),
}


def _subset(fields: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({}, optional=fields)


entries = _subset(ENTRY_FIELDS).flatmap(
    lambda base: st.fixed_dictionaries(
        {},
        optional={"schema": _subset(SCHEMA_FIELDS), "system_prompt": _subset(PROMPT_FIELDS)},
    ).map(lambda nested: {**base, **nested})
)
learned_entries = entries.flatmap(
    lambda base: st.fixed_dictionaries(
        {
            "source": st.sampled_from(["runtime_error", "probe", "observed"]),
            "at": st.sampled_from(["2026-11-22T10:00:00Z", "2026-01-02T03:04:05+00:00"]),
        },
        optional={"evidence": nullable_text, "upstream": st.just("http://127.0.0.1:11434")},
    ).map(lambda extra: {**base, **extra})
)
exact_names = st.from_regex(r"[a-z][a-z0-9.\-]{0,6}(:[a-z0-9]{1,4})?", fullmatch=True)
glob_names = st.from_regex(r"[a-z]{0,4}[*?][a-z0-9:]{0,3}\*?", fullmatch=True)


def _dedupe(names: list[str]) -> list[str]:
    """Drop exact names that normalise to one already taken (the file would be invalid)."""
    seen: set[str] = set()
    kept: list[str] = []
    for name in names:
        key = name if any(c in "*?[" for c in name) else normalise_model_name(name)
        if key not in seen:
            seen.add(key)
            kept.append(name)
    return kept


def sections(names: st.SearchStrategy[str], values: st.SearchStrategy[Any]) -> Any:
    return (
        st.lists(names, max_size=4)
        .map(_dedupe)
        .flatmap(lambda keys: st.tuples(*(values for _ in keys)).map(lambda v: dict(zip(keys, v))))
    )


documents = st.fixed_dictionaries(
    {"version": st.just(1)},
    optional={
        "defaults": entries,
        "models": sections(exact_names | glob_names, entries),
        "learned": sections(exact_names, learned_entries),
    },
)


def render(data: dict[str, Any]) -> str:
    """Plain data -> YAML text, block style, as a person would write it."""

    out = io.StringIO()
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.dump(data, out)
    return out.getvalue()
