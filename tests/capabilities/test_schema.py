from __future__ import annotations

import pytest
from pydantic import ValidationError

from proxy.capabilities.schema import (
    TOOL_FORMATS,
    Capabilities,
    LearnedEntry,
    ModelEntry,
    SchemaEntry,
    bracket_end,
    glob_error,
    is_glob,
)


def error_locs(exc: ValidationError) -> list[tuple[object, ...]]:
    return [tuple(e["loc"]) for e in exc.errors()]


@pytest.mark.parametrize(
    ("name", "glob"),
    [("qwen3", False), ("qwen3:8b", False), ("qwen3*", True), ("q?en", True), ("[ab]x", True)],
)
def test_is_glob(name: str, glob: bool) -> None:
    assert is_glob(name) is glob


@pytest.mark.parametrize("pattern", ["qwen3*", "a[bc]d", "a[!b]c", "a[]]b", "a[!]]b", "x]y", "*"])
def test_good_globs(pattern: str) -> None:
    assert glob_error(pattern) is None


@pytest.mark.parametrize("pattern", ["qwen[3", "a[", "a[]", "a[!]", "ok[a]then[b"])
def test_unclosed_bracket_is_an_error(pattern: str) -> None:
    problem = glob_error(pattern)
    assert problem is not None and "unclosed '['" in problem


def test_bracket_end_follows_fnmatch_literal_bracket_rule() -> None:
    assert bracket_end("a[]]b", 1) == 3
    assert bracket_end("a[!]]b", 1) == 4
    assert bracket_end("a[bc]", 1) == 4
    assert bracket_end("a[bc", 1) is None


def test_every_key_is_optional_and_unset() -> None:
    entry = ModelEntry()
    assert entry.model_fields_set == set()
    assert all(v is None for v in entry.model_dump().values())


def test_schema_key_uses_its_yaml_name() -> None:
    entry = ModelEntry.model_validate({"schema": {"inline_refs": True}})
    assert entry.schema_ == SchemaEntry(inline_refs=True)
    assert entry.model_dump(by_alias=True, exclude_unset=True) == {"schema": {"inline_refs": True}}
    with pytest.raises(ValidationError):
        ModelEntry.model_validate({"schema_": {}})  # the Python name is not a YAML key


@pytest.mark.parametrize(
    "field", ["max_tools", "allow_tools", "parallel_tool_calls", "tool_format"]
)
def test_null_allowed_where_the_builtin_default_is_nothing(field: str) -> None:
    entry = ModelEntry.model_validate({field: None})
    assert entry.model_fields_set == {field}


@pytest.mark.parametrize(
    "data",
    [
        {"tools": None},
        {"deny_tools": None},
        {"rename": None},
        {"system_role": None},
        {"schema": None},
        {"schema": {"inline_refs": None}},
        {"reasoning": None},
    ],
)
def test_null_elsewhere_is_an_error(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="may not be null"):
        ModelEntry.model_validate(data)


@pytest.mark.parametrize(
    "data",
    [
        {"max_tools": "8"},
        {"max_tools": 8.0},
        {"max_tools": True},
        {"system_role": "yes"},
        {"system_role": 1},
        {"deny_tools": "read_file"},
        {"max_tools": -1},
        {"schema": {"max_description_chars": 0}},
        {"tools": "Native"},
        {"drop_tool_choice": ["sometimes"]},
        {"rename": {"": "x"}},
        {"deny_tools": ["bad["]},
    ],
)
def test_no_coercion_or_out_of_range_values(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ModelEntry.model_validate(data)


def test_tool_formats_are_the_known_names() -> None:
    for name in TOOL_FORMATS:
        assert ModelEntry(tool_format=name).tool_format == name
    with pytest.raises(ValidationError, match="unknown tool_format 'hermez'"):
        ModelEntry(tool_format="hermez")


def test_rename_must_be_reversible() -> None:
    assert ModelEntry(rename={"a": "x", "b": "y"}).rename == {"a": "x", "b": "y"}
    with pytest.raises(ValidationError, match="'a' and 'b' both rename to 'x'"):
        ModelEntry(rename={"a": "x", "b": "x"})


def test_learned_entry_needs_source_and_time() -> None:
    entry = LearnedEntry(tools="off", source="probe", at="2026-11-22T10:00:00Z")
    assert entry.evidence is None and entry.upstream is None
    with pytest.raises(ValidationError) as exc:
        LearnedEntry.model_validate({"tools": "off"})
    assert sorted(error_locs(exc.value)) == [("at",), ("source",)]
    with pytest.raises(ValidationError, match="ISO-8601"):
        LearnedEntry(source="probe", at="last tuesday")
    with pytest.raises(ValidationError):
        LearnedEntry.model_validate({"source": "guess", "at": "2026-11-22T10:00:00Z"})


def test_capabilities_defaults_and_null_sections() -> None:
    caps = Capabilities.model_validate({"defaults": None, "models": None, "learned": None})
    assert caps == Capabilities()
    assert caps.version == 1


def test_model_without_keys_is_an_empty_entry() -> None:
    caps = Capabilities.model_validate({"models": {"gemma3:*": None}})
    assert caps.models["gemma3:*"] == ModelEntry()


def test_bad_glob_key_is_reported_at_the_key() -> None:
    with pytest.raises(ValidationError) as exc:
        Capabilities.model_validate({"models": {"qwen[3": {}}})
    assert error_locs(exc.value) == [("models", "qwen[3", "[key]")]


@pytest.mark.parametrize("key", ["", "   "])
def test_empty_model_key_is_an_error(key: str) -> None:
    with pytest.raises(ValidationError, match="may not be empty"):
        Capabilities.model_validate({"models": {key: {}}})


@pytest.mark.parametrize("version", [True, 2, "1"])
def test_only_version_1(version: object) -> None:
    with pytest.raises(ValidationError):
        Capabilities.model_validate({"version": version})


def test_correct_policy_and_max_corrections() -> None:
    entry = ModelEntry.model_validate({"invalid_tool_calls": "correct", "max_corrections": 2})
    assert entry.invalid_tool_calls == "correct" and entry.max_corrections == 2
    for bad in (-1, "1", None, True):
        with pytest.raises(ValidationError):
            ModelEntry.model_validate({"max_corrections": bad})


def test_learned_correction_record() -> None:
    entry = LearnedEntry.model_validate({"source": "observed", "at": "2026-11-22T10:00:00Z",
                                         "correction": {"tried": 3, "succeeded": 1,
                                                        "at": "2026-11-22T10:00:00Z"}})
    assert entry.correction is not None and entry.correction.tried == 3
    with pytest.raises(ValidationError):
        LearnedEntry.model_validate({"source": "observed", "at": "2026-11-22T10:00:00Z",
                                     "correction": {"tried": 1, "at": "yesterday"}})
