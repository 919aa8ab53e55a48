"""JSON-schema rewrites of tool parameters: examples and properties."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from proxy.transforms.request.schema import (
    collapse_nullable,
    drop_keywords,
    inline_refs,
    rewrite_schema,
    rewrite_schemas,
    trim_descriptions,
    trim_text,
)
from proxy.types import Plan, Profile, SchemaRewrite

# ---------------------------------------------------------------- examples


def test_drop_keywords_only_as_keywords() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "additionalProperties": {"type": "string", "additionalProperties": False},
            "nested": {"type": "array", "items": {"type": "object", "additionalProperties": {}}},
        },
        "default": {"additionalProperties": 1},
    }
    before = copy.deepcopy(schema)
    out = drop_keywords(schema, ("additionalProperties", "$schema"))
    assert schema == before
    assert out == {
        "type": "object",
        "properties": {
            "additionalProperties": {"type": "string"},
            "nested": {"type": "array", "items": {"type": "object"}},
        },
        "default": {"additionalProperties": 1},
    }


def test_inline_refs_resolves_defs_and_definitions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/Point", "description": "where"},
            "b": {"$ref": "#/definitions/Name"},
        },
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "definitions": {"Name": {"type": "string"}},
    }
    assert inline_refs(schema) == {
        "type": "object",
        "properties": {
            "a": {"type": "object", "properties": {"x": {"type": "number"}},
                  "description": "where"},
            "b": {"type": "string"},
        },
    }


def test_inline_refs_recursive_ref_becomes_permissive_after_depth_one() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}},
    }
    node = inline_refs(schema)["properties"]["root"]
    assert node["properties"]["children"]["items"] == {}


def test_inline_refs_constraining_siblings_use_all_of_and_dangling_refs_are_permissive() -> None:
    schema = {
        "properties": {
            "a": {"$ref": "#/$defs/S", "maxLength": 3},
            "b": {"$ref": "#/$defs/Missing"},
            "c": {"$ref": "https://example.com/s.json"},
        },
        "$defs": {"S": {"type": "string"}},
    }
    props = inline_refs(schema)["properties"]
    assert props["a"] == {"maxLength": 3, "allOf": [{"type": "string"}]}
    assert props["b"] == {}
    assert props["c"] == {"$ref": "https://example.com/s.json"}


def test_inline_refs_root_ref() -> None:
    schema = {"$ref": "#/$defs/Args", "$defs": {"Args": {"type": "object", "properties": {
        "next": {"$ref": "#"}}}}}
    assert inline_refs(schema) == {"type": "object", "properties": {"next": {}}}


def test_collapse_nullable_forms() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"], "enum": ["x", None]},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None,
                  "description": "count"},
            "c": {"type": ["string", "integer", "null"]},
            "d": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
            "type": {"type": "null"},
        },
    }
    props = collapse_nullable(schema)["properties"]
    assert props["a"] == {"type": "string", "enum": ["x"]}
    assert props["b"] == {"type": "integer", "description": "count"}
    assert props["c"] == {"type": ["string", "integer"]}
    assert props["d"] == schema["properties"]["d"]  # two real branches: nothing to collapse
    assert props["type"] == {"type": "null"}


def test_trim_text_word_boundary() -> None:
    assert trim_text("short", 10) == "short"
    assert trim_text("the quick brown fox", 12) == "the quick…"
    assert trim_text("the quick brown fox", 10) == "the quick…"
    assert trim_text("abcdefghijkl", 5) == "abcd…"
    assert trim_text("abc", 0) == ""


def test_trim_descriptions_of_schema_nodes_not_property_names() -> None:
    schema = {"description": "a long description here", "properties": {
        "description": {"type": "string", "description": "another long one"}}}
    out = trim_descriptions(schema, 8)
    assert out["description"] == "a long…"
    assert out["properties"]["description"] == {"type": "string", "description": "another…"}


def test_step_rewrites_every_tool_and_its_description() -> None:
    tool = {"type": "function", "function": {
        "name": "f", "description": "does many things well",
        "parameters": {"type": "object", "additionalProperties": False}}}
    req = {"model": "m", "tools": [tool]}
    before = copy.deepcopy(req)
    profile = Profile("m", schema=SchemaRewrite(
        drop_keywords=("additionalProperties",), max_description_chars=10))
    out, _ = rewrite_schemas(req, profile, Plan())
    assert req == before
    assert out["tools"][0]["function"] == {
        "name": "f", "description": "does many…", "parameters": {"type": "object"}}
    assert rewrite_schemas(req, Profile("m"), Plan())[0] is req
    assert rewrite_schemas(req, profile, Plan(tools="off"))[0] is req


# ---------------------------------------------------------------- properties

KEYWORDS = ("description", "title", "additionalProperties", "$schema", "default", "format",
            "minimum", "$ref", "$defs", "items", "type")
DEF_REFS = ["#/$defs/A", "#/$defs/B", "#/definitions/C", "#/$defs/Missing"]
prop_names = st.sampled_from(KEYWORDS) | st.text("abcxyz", min_size=1, max_size=3)
types = st.sampled_from(["string", "integer", "number", "boolean", "object", "array"])
annotation_keys = st.fixed_dictionaries({}, optional={
    "description": st.text(" abcdefg", max_size=40),
    "title": st.text("abc", max_size=5),
    "default": st.none() | st.integers(-(2**53), 2**53) | st.just({"additionalProperties": 1}),
})


def _with(base: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda b, a: {**a, **b}, base, annotation_keys)


leaves = st.one_of(
    _with(st.builds(lambda t: {"type": t}, types)),
    _with(st.builds(lambda t: {"type": [t, "null"]}, types)),
    _with(st.builds(lambda r: {"$ref": r}, st.sampled_from(DEF_REFS))),
    st.builds(lambda e: {"type": ["string", "null"], "enum": e},
              st.lists(st.none() | st.sampled_from(["a", "b"]), min_size=1, unique=True)),
    st.just({"format": "uri", "type": "string"}),
    st.booleans(),
)


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        _with(st.builds(
            lambda p, ap: {"type": "object", "properties": p, "additionalProperties": ap},
            st.dictionaries(prop_names, children, max_size=4), children)),
        _with(st.builds(lambda i: {"type": "array", "items": i}, children)),
        _with(st.builds(lambda b: {"anyOf": [b, {"type": "null"}]}, children)),
        _with(st.builds(lambda bs: {"oneOf": bs}, st.lists(children, min_size=1, max_size=3))),
    )


subschemas = st.recursive(leaves, _extend, max_leaves=12)
schemas = st.builds(
    lambda props, a, b, c: {"type": "object", "properties": props,
                            "$defs": {"A": a, "B": b}, "definitions": {"C": c}},
    st.dictionaries(prop_names, subschemas, max_size=4), subschemas, subschemas, subschemas,
)


def schema_nodes(node: Any) -> Iterator[dict[str, Any]]:
    """Every schema node of the tree, walked by keyword (independent of the code)."""
    if not isinstance(node, dict):
        return
    yield node
    for key in ("items", "additionalProperties", "not"):
        yield from schema_nodes(node.get(key))
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(key) or ():
            yield from schema_nodes(sub)
    for key in ("properties", "$defs", "definitions"):
        for sub in (node.get(key) or {}).values():
            yield from schema_nodes(sub)


def property_names(schema: Any) -> set[str]:
    return {name for node in schema_nodes(schema) for name in node.get("properties") or {}}


@settings(max_examples=60, deadline=None)
@given(schemas, st.lists(st.sampled_from(KEYWORDS), max_size=3))
def test_drop_keywords_property(schema: dict[str, Any], names: list[str]) -> None:
    before = copy.deepcopy(schema)
    out = drop_keywords(schema, names)
    assert schema == before
    Draft202012Validator.check_schema(out)
    assert not any(name in node for node in schema_nodes(out) for name in names)
    if "properties" not in names:
        assert property_names(out) <= property_names(schema)
        assert "properties" in out and set(out["properties"]) == set(schema["properties"])


@settings(max_examples=60, deadline=None)
@given(schemas)
def test_inline_refs_property(schema: dict[str, Any]) -> None:
    out = inline_refs(schema)
    Draft202012Validator.check_schema(out)
    nodes = list(schema_nodes(out))
    assert not any(str(n.get("$ref", "")).startswith("#") for n in nodes)
    assert not any("$defs" in n or "definitions" in n for n in nodes)
    assert inline_refs(out) == out


@settings(max_examples=60, deadline=None)
@given(schemas)
def test_collapse_nullable_property(schema: dict[str, Any]) -> None:
    out = collapse_nullable(schema)
    Draft202012Validator.check_schema(out)
    assert not any(
        isinstance(n.get("type"), list) and "null" in n["type"] for n in schema_nodes(out))
    assert collapse_nullable(out) == out


@settings(max_examples=60, deadline=None)
@given(schemas, st.integers(1, 30), st.lists(st.sampled_from(KEYWORDS), max_size=2),
       st.booleans(), st.booleans())
def test_rewrite_schema_property(
    schema: dict[str, Any], limit: int, drop: list[str], inline: bool, collapse: bool
) -> None:
    before = copy.deepcopy(schema)
    assert rewrite_schema(schema, SchemaRewrite()) == schema
    rewrite = SchemaRewrite(tuple(drop), inline, collapse, limit)
    out = rewrite_schema(schema, rewrite)
    assert schema == before
    Draft202012Validator.check_schema(out)
    for node in schema_nodes(out):
        assert not set(drop) & set(node)
        assert len(node.get("description", "")) <= limit
