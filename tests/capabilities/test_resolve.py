from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.capabilities.resolve import (
    Resolver,
    glob_specificity,
    has_entry,
    normalise_model_name,
    resolve_profile,
)
from proxy.capabilities.schema import Capabilities
from proxy.types import Profile, SchemaRewrite, SystemPrompt

from .strategies import entries, learned_entries

AT = "2026-11-22T10:00:00Z"
BUILTIN = Profile(model="")


def caps(**data: Any) -> Capabilities:
    return Capabilities.model_validate(data)


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("qwen3", "qwen3:latest"),
        ("qwen3:8b", "qwen3:8b"),
        ("Qwen3:8B", "qwen3:8b"),
        ("  qwen3  ", "qwen3:latest"),
        ("registry.ollama.ai/library/qwen3", "qwen3:latest"),
        ("registry.ollama.ai/library/qwen3:8b", "qwen3:8b"),
        ("registry.ollama.ai/user/model", "user/model:latest"),
        ("library/qwen3", "qwen3:latest"),
        ("user/model:q4", "user/model:q4"),
        ("localhost:5000/ns/model", "localhost:5000/ns/model:latest"),
        ("localhost:5000/ns/model:v1", "localhost:5000/ns/model:v1"),
        ("hf.co/org/repo:Q4_K_M", "hf.co/org/repo:q4_k_m"),
        ("model@sha256:abc", "model@sha256:abc"),
        ("", ""),
    ],
)
def test_normalise_model_name(raw: str, normalised: str) -> None:
    assert normalise_model_name(raw) == normalised


@given(st.text(max_size=40) | st.from_regex(r"(registry\.ollama\.ai/)*(library/)?[a-z/:]*"))
def test_normalising_is_idempotent(name: str) -> None:
    once = normalise_model_name(name)
    assert normalise_model_name(once) == once


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [("*", 0), ("qwen*", 4), ("qwen3:*", 6), ("q?en3*", 4), ("qwen[23]*", 4), ("a[]]*b", 2)],
)
def test_glob_specificity_counts_literal_characters(pattern: str, literal: int) -> None:
    assert glob_specificity(pattern) == literal


LAYERED = caps(
    defaults={"tools": "native", "max_tools": 10, "fallback": "emulate"},
    learned={
        "qwen3:8b": {
            "tools": "off",
            "max_tools": 5,
            "reasoning": "strip",
            "source": "probe",
            "at": AT,
        }
    },
    models={
        "qwen*": {"tools": "emulate", "tool_format": "hermes"},
        "qwen3*": {"max_tools": 7, "tool_format": "qwen3_coder_xml"},
        "qwen3:8b": {"system_role": False},
        "llama*": {"tools": "off"},
    },
)


def test_precedence_field_by_field() -> None:
    profile = resolve_profile(LAYERED, "qwen3:8b")
    assert profile.model == "qwen3:8b"
    assert profile.system_role is False  # exact entry
    assert profile.max_tools == 7  # most specific glob beats less specific, learned, defaults
    assert profile.tool_format == "qwen3_coder_xml"
    assert profile.tools == "emulate"  # any glob beats learned
    assert profile.tool_support == "none"  # the old learned `tools: off` of a probe, as the fact
    assert profile.reasoning == "strip"  # learned beats defaults
    assert profile.fallback == "emulate"  # defaults beat built-in
    assert profile.invalid_tool_calls == BUILTIN.invalid_tool_calls  # set nowhere
    assert dict(profile.sources) == {
        "tools": "models:qwen*",
        "max_tools": "models:qwen3*",
        "fallback": "defaults",
        "tool_support": "learned",
        "reasoning": "learned",
        "tool_format": "models:qwen3*",
        "system_role": "models:qwen3:8b",
    }


def test_unknown_model_gets_defaults_only() -> None:
    profile = resolve_profile(LAYERED, "mistral")
    expected = dataclasses.replace(
        BUILTIN, model="mistral:latest", tools="native", max_tools=10, fallback="emulate"
    )
    assert dataclasses.replace(profile, sources={}) == expected
    assert set(profile.sources.values()) == {"defaults"}


def test_empty_capabilities_give_the_builtin_profile() -> None:
    assert resolve_profile(Capabilities(), "x") == Profile(model="x:latest")


@pytest.mark.parametrize(
    ("model", "tools"),
    [
        ("qwen3", "emulate"),
        ("registry.ollama.ai/library/qwen3:8b", "emulate"),
        ("QWEN3:8B", "emulate"),
        ("llama3.2", "off"),
        ("gemma3", "native"),
    ],
)
def test_names_are_compared_normalised(model: str, tools: str) -> None:
    assert resolve_profile(LAYERED, model).tools == tools


def test_exact_key_is_normalised() -> None:
    c = caps(models={"Qwen3": {"max_tools": 2}})
    assert resolve_profile(c, "qwen3:latest").max_tools == 2
    assert resolve_profile(c, "registry.ollama.ai/library/qwen3").max_tools == 2
    assert resolve_profile(c, "qwen3:8b").max_tools == BUILTIN.max_tools


def test_learned_key_is_normalised() -> None:
    c = caps(learned={"custom": {"tool_support": "refused", "source": "runtime_error", "at": AT}})
    profile = resolve_profile(c, "custom:latest")
    assert profile.tool_support == "refused" and profile.tools == "auto"
    assert dict(profile.sources) == {"tool_support": "learned"}  # bookkeeping keys are not fields


@pytest.mark.parametrize(("written", "source", "fact"), [
    ("off", "runtime_error", "refused"), ("emulate", "runtime_error", "refused"),
    ("off", "probe", "none")])
def test_an_older_learned_rung_is_read_as_the_fact(written: str, source: str, fact: str) -> None:
    # Files written before tool_support said `tools: off` (or the fallback's rung):
    # the fact is read, and the fallback in force decides the rung.
    c = caps(learned={"custom": {"tools": written, "source": source, "at": AT}})
    profile = resolve_profile(c, "custom")
    assert (profile.tools, profile.tool_support, profile.fallback) == ("auto", fact, "emulate")
    assert dict(profile.sources) == {"tool_support": "learned"}


def test_a_learned_native_tools_stays_a_mode() -> None:
    c = caps(learned={"custom": {"tools": "native", "source": "probe", "at": AT}})
    profile = resolve_profile(c, "custom")
    assert (profile.tools, profile.tool_support) == ("native", None)


@pytest.mark.parametrize(
    ("glob", "model", "matches"),
    [
        ("qwen3*", "qwen3", True),
        ("qwen3*", "qwen3:8b", True),
        ("qwen3:*", "qwen3", True),  # matches the normalised qwen3:latest
        ("*:latest", "qwen3", True),
        ("registry.ollama.ai/*", "registry.ollama.ai/library/qwen3", True),  # the raw name
        ("Qwen3*", "qwen3:8b", True),  # Ollama names are case-insensitive
        ("qwen3?", "qwen3", False),
        ("qwen[23]:*", "qwen2:7b", True),
        ("qwen[!23]:*", "qwen2:7b", False),
        ("llama*", "qwen3", False),
    ],
)
def test_glob_matching(glob: str, model: str, matches: bool) -> None:
    c = caps(models={glob: {"max_tools": 1}})
    assert (resolve_profile(c, model).max_tools == 1) is matches
    assert has_entry(c, model) is matches


@pytest.mark.parametrize(
    ("first", "second", "winner"),
    [
        ("qwen3:*", "qwen*", "qwen3:*"),  # more literal characters
        ("qwen*", "qwen3:*", "qwen3:*"),  # whatever the file order
        ("qwen3*", "qwen3?*", "qwen3?*"),  # same literals: the longer pattern
        ("q*n3:8b", "qw*3:8b", "qw*3:8b"),  # a full tie: the later entry
        ("qw*3:8b", "q*n3:8b", "q*n3:8b"),
    ],
)
def test_most_specific_glob_wins(first: str, second: str, winner: str) -> None:
    c = caps(models={first: {"tool_format": "hermes"}, second: {"tool_format": "mistral"}})
    profile = resolve_profile(c, "qwen3:8b")
    assert profile.sources["tool_format"] == f"models:{winner}"
    assert profile.tool_format == ("hermes" if winner == first else "mistral")


def test_nested_keys_merge_one_level_deeper() -> None:
    c = caps(
        defaults={"system_prompt": {"prepend": "P", "append": "A"}},
        models={
            "m*": {"schema": {"inline_refs": True, "max_description_chars": 80}},
            "m": {
                "schema": {"drop_keywords": ["format"], "max_description_chars": None},
                "system_prompt": {"append": None},
            },
        },
    )
    profile = resolve_profile(c, "m")
    assert profile.schema == SchemaRewrite(drop_keywords=("format",), inline_refs=True)
    assert profile.system_prompt == SystemPrompt(prepend="P")
    assert profile.sources["schema"] == "models:m"
    assert profile.sources["system_prompt"] == "models:m"


def test_explicit_null_resets_a_less_specific_value() -> None:
    c = caps(
        models={
            "m*": {"max_tools": 8, "allow_tools": ["a"], "parallel_tool_calls": False},
            "m": {"max_tools": None, "allow_tools": None},
        }
    )
    profile = resolve_profile(c, "m")
    assert profile.max_tools is None
    assert profile.allow_tools is None
    assert profile.parallel_tool_calls is False
    assert profile.sources["max_tools"] == "models:m"


def test_collections_become_immutable_profile_shapes() -> None:
    c = caps(
        defaults={
            "rename": {"read_file": "fs_read", "bash": "shell"},
            "allow_tools": ["bash", "read_*"],
            "deny_tools": ["rm"],
            "drop_tool_choice": ["required"],
        }
    )
    profile = resolve_profile(c, "m")
    assert profile.rename == (("read_file", "fs_read"), ("bash", "shell"))
    assert profile.allow_tools == ("bash", "read_*")
    assert profile.deny_tools == ("rm",)
    assert profile.drop_tool_choice == ("required",)


def test_has_entry() -> None:
    assert not has_entry(LAYERED, "mistral")  # defaults alone are not an entry
    assert has_entry(LAYERED, "qwen2.5")  # glob
    assert has_entry(LAYERED, "qwen3:8b")
    c = caps(learned={"x": {"source": "probe", "at": AT}})
    assert has_entry(c, "x:latest")
    assert not has_entry(Capabilities(), "x")


def test_resolver_is_reusable_and_does_not_mutate() -> None:
    before = LAYERED.model_dump()
    resolver = Resolver.build(LAYERED)
    for model in ("qwen3:8b", "llama3", "gemma"):
        assert resolver.resolve(model) == resolve_profile(LAYERED, model)
    assert LAYERED.model_dump() == before


# --- properties -------------------------------------------------------------

GLOBS = ["*", "q*", "qwen*", "qwen3*", "qwen3:*", "*:8b", "llama*", "q?en3*"]
MODELS = ["qwen3", "qwen3:8b", "llama3.2", "gemma3:4b"]
NESTED = {"schema_": "schema", "system_prompt": "system_prompt"}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Capabilities, str, str | None]:
    model = draw(st.sampled_from(MODELS))
    models = {g: draw(entries) for g in draw(st.lists(st.sampled_from(GLOBS), unique=True))}
    exact = draw(st.none() | st.sampled_from([model, normalise_model_name(model).upper()]))
    if exact is not None:
        models[exact] = draw(entries)
    learned = {model: draw(learned_entries)} if draw(st.booleans()) else {}
    c = caps(defaults=draw(entries), models=models, learned=learned)
    return c, model, exact


def _field(name: str) -> str:
    return NESTED.get(name, name)


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_exact_entry_always_wins(scenario: tuple[Capabilities, str, str | None]) -> None:
    c, model, exact = scenario
    profile = resolve_profile(c, model)
    if exact is None:
        return
    entry = c.models[exact]
    for name in entry.model_fields_set:
        value = getattr(entry, name)
        if name in NESTED:
            nested = getattr(profile, NESTED[name])
            for sub, sub_value in value.model_dump(exclude_unset=True).items():
                got = getattr(nested, sub)
                assert got == (tuple(sub_value) if isinstance(sub_value, list) else sub_value)
            if value.model_fields_set:
                assert profile.sources[NESTED[name]] == f"models:{exact}"
            continue
        expected = getattr(Profile(model="", **{name: _convert(value)}), name)
        assert getattr(profile, name) == expected
        assert profile.sources[name] == f"models:{exact}"


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_field_set_nowhere_is_the_builtin_default(
    scenario: tuple[Capabilities, str, str | None],
) -> None:
    c, model, _ = scenario
    profile = resolve_profile(c, model)
    applied = [entry for _, entry in Resolver.build(c).layers(model)]
    touched = {_field(n) for entry in applied for n in entry.model_fields_set}
    if "tools" in touched:
        touched.add("tool_support")  # a learned `tools: off` of an older file is that fact
    for field in dataclasses.fields(Profile):
        if field.name in ("model", "sources"):
            continue
        if field.name not in touched:
            assert getattr(profile, field.name) == getattr(BUILTIN, field.name)
            assert field.name not in profile.sources
    assert set(profile.sources) <= touched


def _convert(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, dict):
        return tuple(value.items())
    return value
