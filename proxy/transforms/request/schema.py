"""JSON-schema rewrites of tool parameters, per `profile.schema`.

Owns walking a schema by its keywords (never into `properties` names,
`enum`, `default` or other data) and the four rewrites: drop keywords,
inline local `$ref`s, collapse nullable types, trim descriptions. Every
function returns a new schema; none mutates its argument.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any
from urllib.parse import unquote

from proxy.types import ChatRequest, Observation, Plan, Profile, SchemaRewrite

Schema = Any
"""A JSON schema node: usually a dict, booleans are valid schemas too."""

_ONE = ("additionalProperties", "additionalItems", "not", "if", "then", "else", "contains",
        "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema", "items")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
        "dependencies")
_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "deprecated"})


def map_subschemas(node: Schema, fn: Callable[[Schema], Schema]) -> Schema:
    """A copy of `node` with `fn` applied to each direct subschema."""
    if not isinstance(node, dict):
        return node
    out = dict(node)
    for key, value in node.items():
        if key in _ONE and isinstance(value, (dict, bool)):
            out[key] = fn(value)
        elif key in _LIST and isinstance(value, list):
            out[key] = [fn(item) for item in value]
        elif key in _MAP and isinstance(value, dict):
            # `dependencies` values may be arrays of property names: data, kept.
            out[key] = {k: fn(v) if isinstance(v, (dict, bool)) else v for k, v in value.items()}
    return out


def drop_keywords(schema: Schema, names: Collection[str]) -> Schema:
    """Remove keywords in `names` from every schema node of the tree."""
    if not isinstance(schema, dict) or not names:
        return schema
    kept = {k: v for k, v in schema.items() if k not in names}
    return map_subschemas(kept, lambda sub: drop_keywords(sub, names))


def resolve_pointer(root: Schema, ref: str) -> Schema | None:
    """Resolve a local `#/a/b` JSON pointer (`#` alone: root) against `root`, None if absent."""
    node = root
    if ref in ("#", "#/"):
        return root
    for raw in ref.lstrip("#").lstrip("/").split("/"):
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _inline(node: Schema, root: Schema, stack: tuple[str, ...]) -> Schema:
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#"):
        return map_subschemas(node, lambda sub: _inline(sub, root, stack))
    target = resolve_pointer(root, ref) if ref.startswith("#/") else None
    # A ref to itself (or to the root) would expand forever: past depth 1 it
    # becomes the permissive schema, and a dangling ref cannot be honoured.
    if ref in stack or not isinstance(target, (dict, bool)):
        resolved: Schema = {}
    else:
        resolved = _inline(target, root, (*stack, ref))
    # Definitions beside a $ref are dropped after inlining anyway.
    siblings = {k: v for k, v in node.items() if k not in ("$ref", "$defs", "definitions")}
    siblings = map_subschemas(siblings, lambda sub: _inline(sub, root, stack))
    if not siblings:
        return resolved
    if isinstance(resolved, dict) and (set(siblings) <= _ANNOTATIONS or not resolved):
        return {**resolved, **siblings}
    # Siblings of $ref constrain too (2020-12): keep both sides with allOf.
    return {**siblings, "allOf": [resolved, *siblings.get("allOf", [])]}


def inline_refs(schema: Schema) -> Schema:
    """Replace local `$ref`s by their targets; drop `$defs` / `definitions`."""
    if not isinstance(schema, dict):
        return schema
    return drop_keywords(_inline(schema, schema, ()), ("$defs", "definitions"))


def _null_branch(branch: Schema) -> bool:
    return (
        isinstance(branch, dict)
        and branch.get("type") == "null"
        and set(branch) <= {"type", "description", "title"}
    )


def _collapse_branches(node: dict[str, Any], key: str) -> dict[str, Any]:
    branches = node.get(key)
    if not isinstance(branches, list) or not any(_null_branch(b) for b in branches):
        return node
    rest = [b for b in branches if not _null_branch(b)]
    if len(rest) != 1 or not isinstance(rest[0], dict):
        return node
    others = {k: v for k, v in node.items() if k != key}
    if others.get("default", 0) is None:
        del others["default"]
    if (set(others) & set(rest[0])) - _ANNOTATIONS:
        return {**others, "allOf": [rest[0], *others.get("allOf", [])]}
    # The outer annotations describe the parameter as the client meant it.
    return {**rest[0], **others}


def _collapse_type(node: dict[str, Any]) -> dict[str, Any]:
    types = node.get("type")
    if not isinstance(types, list) or "null" not in types:
        return node
    rest = [t for t in types if t != "null"]
    if not rest:
        return node
    out = {**node, "type": rest[0] if len(rest) == 1 else rest}
    if out.get("default", 0) is None:
        del out["default"]
    enum = out.get("enum")
    if isinstance(enum, list) and None in enum and any(v is not None for v in enum):
        out["enum"] = [v for v in out["enum"] if v is not None]
    return out


def collapse_nullable(schema: Schema) -> Schema:
    """`type: [T, "null"]` -> `type: T`; `anyOf: [S, {"type": "null"}]` -> S."""
    if not isinstance(schema, dict):
        return schema
    node = map_subschemas(schema, collapse_nullable)
    for key in ("anyOf", "oneOf"):
        node = _collapse_branches(node, key)
    return _collapse_type(node)


def trim_text(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, with "…"."""
    if len(text) <= limit:
        return text
    if limit < 1:
        return ""
    head = text[: limit - 1]
    words = head.rsplit(None, 1)
    # Keep the last word of `head` only if it ended there; a single long word
    # is cut mid-word rather than lost.
    at_boundary = head[-1:].isspace() or text[len(head)].isspace()
    if not at_boundary and len(words) == 2:
        head = words[0]
    return head.rstrip() + "…"


def trim_descriptions(schema: Schema, limit: int) -> Schema:
    """Trim every `description` keyword in the schema tree to `limit` chars."""
    if not isinstance(schema, dict):
        return schema
    node = map_subschemas(schema, lambda sub: trim_descriptions(sub, limit))
    if isinstance(node.get("description"), str):
        node["description"] = trim_text(node["description"], limit)
    return node


def rewrite_schema(schema: Schema, rewrite: SchemaRewrite) -> Schema:
    """All rewrites of `rewrite`, refs first so inlined parts get the rest."""
    if rewrite.inline_refs:
        schema = inline_refs(schema)
    if rewrite.collapse_nullable:
        schema = collapse_nullable(schema)
    schema = drop_keywords(schema, rewrite.drop_keywords)
    if rewrite.max_description_chars is not None:
        schema = trim_descriptions(schema, rewrite.max_description_chars)
    return schema


def _rewrite_tool(tool: Any, rewrite: SchemaRewrite) -> Any:
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(function, dict):
        return tool
    new = dict(function)
    if "parameters" in function:
        new["parameters"] = rewrite_schema(function["parameters"], rewrite)
    limit = rewrite.max_description_chars
    if limit is not None and isinstance(function.get("description"), str):
        new["description"] = trim_text(function["description"], limit)
    return {**tool, "function": new}


def rewrite_schemas(
    request: ChatRequest, profile: Profile, plan: Plan
) -> tuple[ChatRequest, list[Observation]]:
    """Rewrite every tool's parameters schema and description per profile."""
    tools = request.get("tools")
    if plan.tools == "off" or not isinstance(tools, list) or profile.schema == SchemaRewrite():
        return request, []
    return {**request, "tools": [_rewrite_tool(t, profile.schema) for t in tools]}, []
