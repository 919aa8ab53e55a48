"""Shapes of client JSON that would make a walk over it run away, refused at the edge.

Owns two checks run once on a parsed request, before any stage sees it: the
nesting depth (every later walk is recursive: schema rewrites, validators,
history flattening, logging, and `orjson.dumps` itself stops at 254 levels),
and `$ref` cycles that never reach into the instance (`a -> b -> a`), which
a validator would follow forever. Both are iterative, so the checks
themselves cannot overflow. Must not: change the body, or do I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from proxy.transforms.request.schema import resolve_pointer

# Keywords whose subschemas apply to the same instance: following only these
# through $refs and coming back to where we started never ends.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LIST = ("allOf", "anyOf", "oneOf")


def ref_cycle(schema: Any) -> str | None:
    """A `$ref` loop that applies to one instance forever, as 'a -> b -> a'; else None."""
    if not isinstance(schema, dict):
        return None
    done: set[str] = set()
    for start in _ref_nodes(schema):
        if start in done:
            continue
        # Iterative depth-first search; `trail` is the current path of refs.
        trail: list[str] = [start]
        branches: list[Iterator[str]] = [iter(_in_place_refs(schema, start))]
        while branches:
            nxt = next(branches[-1], None)
            if nxt is None:
                done.add(trail.pop())
                branches.pop()
            elif nxt in trail:
                return " -> ".join([*trail[trail.index(nxt):], nxt])
            elif nxt not in done:
                trail.append(nxt)
                branches.append(iter(_in_place_refs(schema, nxt)))
    return None


MAX_EXPANDED = 100_000
"""schema nodes a tool's parameters may grow to once local $refs are inlined."""


def expansion_exceeds(schema: Any, budget: int = MAX_EXPANDED) -> bool:
    """Whether inlining local $refs (as the schema rewrite does: a ref already being
    expanded becomes `{}`) would pass `budget` nodes: refs that fan out to refs,
    level after level, grow exponentially from a small body."""
    if not isinstance(schema, dict):
        return False
    count = 0
    pending: list[tuple[Any, tuple[str, ...]]] = [(schema, ())]
    while pending:
        node, stack = pending.pop()
        count += 1
        if count > budget:
            return True
        if isinstance(node, list):
            pending.extend((item, stack) for item in node if isinstance(item, (dict, list)))
            continue
        if not isinstance(node, dict):
            continue
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#") and ref not in stack:
            pending.append((resolve_pointer(schema, ref), (*stack, ref)))
        pending.extend((value, stack) for key, value in node.items()
                       if key != "$ref" and isinstance(value, (dict, list)))
    return False


def _ref_nodes(schema: dict[str, Any]) -> Iterator[str]:
    """Every local $ref value in the schema (walked iteratively)."""
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#"):
                yield ref
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


def _in_place_refs(root: dict[str, Any], ref: str) -> list[str]:
    """The refs the target of `ref` applies to the same instance (itself, allOf, not, ...)."""
    found: list[str] = []
    pending: list[Any] = [resolve_pointer(root, ref)]
    while pending:
        node = pending.pop()
        if not isinstance(node, dict):
            continue
        nested = node.get("$ref")
        if isinstance(nested, str) and nested.startswith("#"):
            found.append(nested)
        pending.extend(node.get(k) for k in _IN_PLACE_ONE)
        for key in _IN_PLACE_LIST:
            value = node.get(key)
            if isinstance(value, list):
                pending.extend(value)
    return found
